// Fuzzes the safetensors reader and the HF weight binder: each input is a
// model.safetensors, parsed and bound against micro Llama and Qwen2 configs. Besides "no
// crash", it checks what callers rely on: every tensor's bytes and every bound matrix lie
// inside the input and have the size their shape and type say. The same bytes are also
// tried as a model.safetensors.index.json.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kernels/cpu/matmul.h"
#include "model/hf_loader.h"
#include "model/safetensors.h"
#include "tests/fuzz/micro_model.h"

namespace {

void Require(bool cond) {
  if (!cond) std::abort();
}

bool Inside(std::string_view outer, const void* p, uint64_t n) {
  const auto* c = static_cast<const char*>(p);
  return n == 0 || (c >= outer.data() && n <= outer.size() &&
                    c - outer.data() <= static_cast<ptrdiff_t>(outer.size() - n));
}

void CheckMatrix(std::string_view bytes, const baton::cpu::MatrixRef& m) {
  Require(m.rows > 0 && m.cols > 0);
  Require(
      Inside(bytes, m.data, static_cast<uint64_t>(m.rows) * baton::cpu::RowBytes(m.dtype, m.cols)));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::string> configs = baton::model::testing::MicroConfigJsons();
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  absl::StatusOr<baton::model::SafetensorsFile> file =
      baton::model::SafetensorsFile::Parse(bytes, "fuzz");
  if (file.ok()) {
    for (const baton::model::SafetensorsTensor& t : file->tensors()) {
      Require(Inside(bytes, t.data.data(), t.data.size()));
      Require(file->Find(t.name) == &t);
    }
  } else {
    Require(!file.status().message().empty());
  }

  for (const std::string& config : configs) {
    baton::model::HfModelBytes in;
    in.config_json = config;
    in.files.emplace_back("model.safetensors", bytes);
    in.source = "fuzz";
    absl::StatusOr<baton::model::ModelParts> parts = baton::model::LoadHfModel(in);
    if (!parts.ok()) {
      Require(!parts.status().message().empty());
      continue;
    }
    const baton::model::Weights& w = parts->weights;
    CheckMatrix(bytes, w.embedding);
    CheckMatrix(bytes, w.lm_head);
    Require(w.layers.size() == static_cast<size_t>(parts->config.num_layers));
    for (const baton::model::LayerWeights& l : w.layers) {
      for (const baton::model::Linear* lin : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) {
        CheckMatrix(bytes, lin->weight);
        Require(lin->bias.empty() || static_cast<int64_t>(lin->bias.size()) == lin->weight.rows);
      }
      Require(static_cast<int64_t>(l.attn_norm.size()) == parts->config.hidden_size);
    }
  }

  (void)baton::model::ParseSafetensorsIndex(bytes, "fuzz-index");
  return 0;
}
