#include "modelgen/synthetic_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <span>

#include "common/check.h"
#include "common/status.h"
#include "common/strings.h"
#include "kernels/cpu/quant_blocks.h"
#include "model/float_convert.h"
#include "model/rope_frequencies.h"
#include "modelgen/gguf_writer.h"
#include "modelgen/safetensors_writer.h"
#include "nlohmann/json.hpp"

namespace baton::modelgen {
namespace {

using model::Bf16ToF32;
using model::F16ToF32;
using model::F32ToBf16;
using model::F32ToF16;
using model::kQ8BlockBytes;
using model::kQ8BlockElems;
using model::Llama3RopeFreqFactors;
using model::ModelConfig;
using model::QuantizeQ8_0;
using model::RopeScaling;
using model::ValidateModelConfig;
using ordered_json = nlohmann::ordered_json;

// A few GPT-2-style merges, so the tokenizer exercises merging; the merged tokens take
// ids 256.. in this order and <|endoftext|> the next one.
constexpr std::pair<const char*, const char*> kMerges[] = {
    {"\xC4\xA0", "t"}, {"h", "e"}, {"\xC4\xA0t", "he"}, {"i", "n"},
    {"\xC4\xA0", "a"}, {"e", "r"}, {"o", "n"},          {"\xC4\xA0", "s"}};
static_assert(256 + std::size(kMerges) == kSyntheticEosId);
static_assert(kSyntheticTokenizerSize == kSyntheticEosId + 1);
constexpr const char* kEndOfText = "<|endoftext|>";
// A plain-text chat template, so chat requests work without role tokens.
constexpr const char* kChatTemplate =
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";

std::string Utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else {
    // The byte-level alphabet stays below U+0800: two bytes.
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the others
// map to U+0100 upward in byte order.
std::vector<std::string> ByteTokens() {
  std::vector<std::string> tokens(256);
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    tokens[b] = Utf8(printable ? b : next++);
  }
  return tokens;
}

std::vector<std::string> TokenizerTokens() {
  std::vector<std::string> tokens = ByteTokens();
  for (const auto& [a, b] : kMerges) tokens.push_back(std::string(a) + b);
  tokens.emplace_back(kEndOfText);
  return tokens;
}

// ---- deterministic weights ----

uint64_t Mix(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

enum class Kind { kMatrix, kNorm, kBias, kConstant };

struct Tensor {
  std::string hf_name;    // also the key of its random stream
  std::string gguf_name;  // empty: not in the GGUF
  Kind kind;
  int64_t rows;  // vectors: 1
  int64_t cols;
  float scale = 0;
  int64_t permute_heads = 0;    // GGUF llama Q/K: heads whose rows are interleaved
  std::vector<float> constant;  // kConstant (rope_freqs)

  Tensor(std::string hf, std::string gguf, Kind k, int64_t r, int64_t c)
      : hf_name(std::move(hf)), gguf_name(std::move(gguf)), kind(k), rows(r), cols(c) {}
};

void GenerateRow(uint64_t key, const Tensor& t, int64_t row, float* out) {
  if (t.kind == Kind::kConstant) {
    std::copy(t.constant.begin(), t.constant.end(), out);
    return;
  }
  uint64_t s = Mix(key ^ Mix(static_cast<uint64_t>(row) + 1));
  const float offset = t.kind == Kind::kNorm ? 1.0f : 0.0f;
  for (int64_t c = 0; c < t.cols; ++c) {
    s += 0x9e3779b97f4a7c15ull;
    const float u = static_cast<float>(Mix(s) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    out[c] = offset + (2.0f * u - 1.0f) * t.scale;
  }
}

// llama.cpp's convert_hf_to_gguf.py `permute`: within each head, row i*hd/2 + j of the
// HF (rotate_half) layout moves to row 2j + i, so rotary pairs become adjacent.
int64_t HfRowOfGgufRow(int64_t row, int64_t rows, int64_t heads) {
  const int64_t hd = rows / heads;
  const int64_t h = row / hd, within = row % hd;
  return h * hd + (within % 2) * (hd / 2) + within / 2;
}

float RoundTo(cpu::DType dtype, float v) {
  switch (dtype) {
    case cpu::DType::kF16:
      return F16ToF32(F32ToF16(v));
    case cpu::DType::kBF16:
      return Bf16ToF32(F32ToBf16(v));
    default:
      return v;
  }
}

void AppendRow(cpu::DType dtype, std::span<const float> row, std::string* out) {
  const size_t at = out->size();
  switch (dtype) {
    case cpu::DType::kF32:
      out->append(reinterpret_cast<const char*>(row.data()), row.size() * 4);
      return;
    case cpu::DType::kF16:
    case cpu::DType::kBF16:
      out->resize(at + row.size() * 2);
      for (size_t i = 0; i < row.size(); ++i) {
        const uint16_t h = dtype == cpu::DType::kF16 ? F32ToF16(row[i]) : F32ToBf16(row[i]);
        std::memcpy(out->data() + at + 2 * i, &h, 2);
      }
      return;
    case cpu::DType::kQ8_0:
      out->resize(at + row.size() / kQ8BlockElems * kQ8BlockBytes);
      QuantizeQ8_0(row, reinterpret_cast<uint8_t*>(out->data() + at));
      return;
    default: {
      // The other block-quantized types get valid blocks of pseudo-random quants and
      // modest scales drawn from the row: not an approximation of its values, only
      // well-formed bytes (loader tests and fuzz seeds; synth-model does not offer them).
      const cpu::BlockLayout layout = cpu::LayoutOf(dtype);
      const size_t blocks = row.size() / static_cast<size_t>(layout.elems);
      out->resize(at + blocks * static_cast<size_t>(layout.bytes));
      auto* p = reinterpret_cast<uint8_t*>(out->data() + at);
      for (size_t b = 0; b < blocks; ++b) {
        uint32_t bits = 0;
        std::memcpy(&bits, &row[b * static_cast<size_t>(layout.elems)], 4);
        for (int e = 0; e < layout.bytes; ++e) {
          bits = bits * 1664525u + 1013904223u;
          p[b * layout.bytes + e] = static_cast<uint8_t>(bits >> 24);
        }
        for (int off : layout.scale_offsets) {
          if (off < 0) continue;
          const uint16_t h = F32ToF16(0.002f + 0.001f * std::fabs(row[b * layout.elems]));
          std::memcpy(p + b * layout.bytes + off, &h, 2);
        }
      }
      return;
    }
  }
}

// Streams a tensor in `dtype`, about 1 MiB at a time. `value_dtype` is the type the
// values are rounded to first: a GGUF f32 vector holds exactly the HF bf16 values.
TensorDataFn Data(uint64_t seed, const Tensor* t, cpu::DType dtype, cpu::DType value_dtype,
                  bool permute) {
  return [=](const std::function<void(std::string_view)>& write) {
    const uint64_t key = Mix(seed) ^ Fnv1a(t->hf_name);
    const size_t row_bytes = cpu::RowBytes(dtype, t->cols);
    const size_t chunk = std::max<size_t>(row_bytes, size_t{1} << 20);
    std::vector<float> row(static_cast<size_t>(t->cols));
    std::string buf;
    buf.reserve(chunk + row_bytes);
    for (int64_t r = 0; r < t->rows; ++r) {
      const int64_t src = permute ? HfRowOfGgufRow(r, t->rows, t->permute_heads) : r;
      GenerateRow(key, *t, src, row.data());
      if (value_dtype != dtype) {
        for (float& v : row) v = RoundTo(value_dtype, v);
      }
      AppendRow(dtype, row, &buf);
      if (buf.size() >= chunk) {
        write(buf);
        buf.clear();
      }
    }
    if (!buf.empty()) write(buf);
  };
}

std::vector<Tensor> Plan(const ModelConfig& c, bool gguf_permutes) {
  std::vector<Tensor> plan;
  auto matrix = [&](std::string hf, std::string gguf, int64_t rows, int64_t cols,
                    int64_t permute_heads = 0) {
    Tensor t(std::move(hf), std::move(gguf), Kind::kMatrix, rows, cols);
    // Uniform in [-a, a] has variance a^2/3; a = sqrt(3/cols) gives variance 1/cols.
    t.scale = std::sqrt(3.0f / static_cast<float>(cols));
    t.permute_heads = gguf_permutes ? permute_heads : 0;
    plan.push_back(std::move(t));
  };
  auto vector = [&](std::string hf, std::string gguf, Kind kind, int64_t n) {
    Tensor t(std::move(hf), std::move(gguf), kind, 1, n);
    t.scale = kind == Kind::kNorm ? 0.1f : 0.02f;
    plan.push_back(std::move(t));
  };
  const int64_t q_rows = c.num_heads * c.head_dim, kv_rows = c.num_kv_heads * c.head_dim;
  // The embedding doubles as the head when tied, so it gets the head's 1/hidden scale.
  matrix("model.embed_tokens.weight", "token_embd.weight", c.vocab_size, c.hidden_size);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string hf = baton::StrCat("model.layers.", i, ".");
    const std::string gg = baton::StrCat("blk.", i, ".");
    vector(hf + "input_layernorm.weight", gg + "attn_norm.weight", Kind::kNorm, c.hidden_size);
    matrix(hf + "self_attn.q_proj.weight", gg + "attn_q.weight", q_rows, c.hidden_size,
           c.num_heads);
    matrix(hf + "self_attn.k_proj.weight", gg + "attn_k.weight", kv_rows, c.hidden_size,
           c.num_kv_heads);
    matrix(hf + "self_attn.v_proj.weight", gg + "attn_v.weight", kv_rows, c.hidden_size);
    if (c.attention_bias) {
      // Biases of Q and K are permuted with their rows (a 1-row tensor of q_rows values
      // is permuted as a column here: generate as rows of one value each).
      for (auto [proj, gname, n, heads] : {std::tuple{"q", "attn_q", q_rows, c.num_heads},
                                           std::tuple{"k", "attn_k", kv_rows, c.num_kv_heads},
                                           std::tuple{"v", "attn_v", kv_rows, int64_t{0}}}) {
        Tensor t(baton::StrCat(hf, "self_attn.", proj, "_proj.bias"),
                 baton::StrCat(gg, gname, ".bias"), Kind::kBias, n, 1);
        t.scale = 0.02f;
        t.permute_heads = gguf_permutes ? heads : 0;
        plan.push_back(std::move(t));
      }
    }
    matrix(hf + "self_attn.o_proj.weight", gg + "attn_output.weight", c.hidden_size, q_rows);
    vector(hf + "post_attention_layernorm.weight", gg + "ffn_norm.weight", Kind::kNorm,
           c.hidden_size);
    matrix(hf + "mlp.gate_proj.weight", gg + "ffn_gate.weight", c.intermediate_size, c.hidden_size);
    matrix(hf + "mlp.up_proj.weight", gg + "ffn_up.weight", c.intermediate_size, c.hidden_size);
    matrix(hf + "mlp.down_proj.weight", gg + "ffn_down.weight", c.hidden_size, c.intermediate_size);
  }
  vector("model.norm.weight", "output_norm.weight", Kind::kNorm, c.hidden_size);
  if (!c.tie_word_embeddings) {
    matrix("lm_head.weight", "output.weight", c.vocab_size, c.hidden_size);
  }
  if (c.rope_scaling.type == RopeScaling::Type::kLlama3) {
    // llama.cpp bakes Llama 3 scaling into this tensor; HF computes it from the config.
    Tensor t("rope_freqs.weight", "rope_freqs.weight", Kind::kConstant, 1, c.head_dim / 2);
    t.constant = Llama3RopeFreqFactors(c.head_dim, c.rope_theta, c.rope_scaling);
    plan.push_back(std::move(t));
  }
  return plan;
}

bool IsVector(const Tensor& t) { return t.kind != Kind::kMatrix; }
int64_t Elements(const Tensor& t) { return t.rows * t.cols; }

// ---- the HF directory ----

const char* TorchDtype(cpu::DType dtype) {
  switch (dtype) {
    case cpu::DType::kF32:
      return "float32";
    case cpu::DType::kF16:
      return "float16";
    default:
      return "bfloat16";
  }
}

std::string ConfigJson(const ModelConfig& c, cpu::DType dtype) {
  ordered_json j;
  const bool qwen2 = c.architecture == "Qwen2ForCausalLM";
  j["architectures"] = {c.architecture};
  j["model_type"] = qwen2 ? "qwen2" : c.architecture == "MistralForCausalLM" ? "mistral" : "llama";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  const RopeScaling& r = c.rope_scaling;
  if (r.type == RopeScaling::Type::kLlama3) {
    j["rope_scaling"] = {{"factor", r.factor},
                         {"low_freq_factor", r.low_freq_factor},
                         {"high_freq_factor", r.high_freq_factor},
                         {"original_max_position_embeddings", r.original_max_position},
                         {"rope_type", "llama3"}};
  } else if (r.type == RopeScaling::Type::kLinear) {
    j["rope_scaling"] = {{"factor", r.factor}, {"rope_type", "linear"}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (qwen2) {
    j["use_sliding_window"] = false;
  } else {
    j["attention_bias"] = c.attention_bias;
    j["mlp_bias"] = false;
  }
  j["hidden_act"] = "silu";
  j["bos_token_id"] = c.bos_token_id >= 0 ? ordered_json(c.bos_token_id) : ordered_json(nullptr);
  j["eos_token_id"] = c.eos_token_ids.front();
  j["torch_dtype"] = TorchDtype(dtype);
  return j.dump(2) + "\n";
}

std::string GenerationConfigJson(const ModelConfig& c) {
  ordered_json j;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_ids.front();
  j["do_sample"] = false;
  return j.dump(2) + "\n";
}

absl::Status WriteText(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::DataLossError(baton::StrCat("cannot write '", path.string(), "'"));
  return absl::OkStatus();
}

SafetensorsWriter HfWriter(const SyntheticModelSpec& spec, const std::vector<Tensor>& plan) {
  SafetensorsWriter w;
  w.SetMetadata("format", "pt");
  w.SetMetadata("source", baton::StrCat("baton synth-model, seed ", spec.seed));
  for (const Tensor& t : plan) {
    if (t.kind == Kind::kConstant) continue;  // rope_freqs exists only in GGUF
    std::vector<int64_t> shape =
        IsVector(t) ? std::vector<int64_t>{Elements(t)} : std::vector<int64_t>{t.rows, t.cols};
    w.AddTensor(t.hf_name, spec.dtype, std::move(shape),
                Data(spec.seed, &t, spec.dtype, spec.dtype, /*permute=*/false));
  }
  return w;
}

// ---- the GGUF file ----

uint32_t FileType(cpu::DType dtype) {  // llama.cpp's general.file_type
  switch (dtype) {
    case cpu::DType::kF32:
      return 0;
    case cpu::DType::kF16:
      return 1;
    case cpu::DType::kQ8_0:
      return 7;
    case cpu::DType::kBF16:
      return 32;
    case cpu::DType::kQ4_0:
      return 2;
    case cpu::DType::kQ4_1:
      return 3;
    case cpu::DType::kQ5_0:
      return 8;
    case cpu::DType::kQ5_1:
      return 9;
    case cpu::DType::kQ2_K:
      return 10;
    case cpu::DType::kQ3_K:
      return 12;  // "Q3_K_M": llama.cpp has no plain Q3_K file type
    case cpu::DType::kQ4_K:
      return 15;  // "Q4_K_M"
    case cpu::DType::kQ5_K:
      return 17;  // "Q5_K_M"
    case cpu::DType::kQ6_K:
      return 18;
  }
  return 0;
}

GgufType ToGguf(cpu::DType dtype) {
  switch (dtype) {
    case cpu::DType::kF32:
      return GgufType::kF32;
    case cpu::DType::kF16:
      return GgufType::kF16;
    case cpu::DType::kQ8_0:
      return GgufType::kQ8_0;
    case cpu::DType::kBF16:
      return GgufType::kBF16;
    case cpu::DType::kQ4_0:
      return GgufType::kQ4_0;
    case cpu::DType::kQ4_1:
      return GgufType::kQ4_1;
    case cpu::DType::kQ5_0:
      return GgufType::kQ5_0;
    case cpu::DType::kQ5_1:
      return GgufType::kQ5_1;
    case cpu::DType::kQ2_K:
      return GgufType::kQ2_K;
    case cpu::DType::kQ3_K:
      return GgufType::kQ3_K;
    case cpu::DType::kQ4_K:
      return GgufType::kQ4_K;
    case cpu::DType::kQ5_K:
      return GgufType::kQ5_K;
    case cpu::DType::kQ6_K:
      return GgufType::kQ6_K;
  }
  return GgufType::kF32;
}

// The vocabulary, padded to vocab_size with unused [PADn] tokens as llama.cpp's
// converter does, so token count and embedding rows agree.
void AddTokenizer(const ModelConfig& c, GgufWriter* out) {
  GgufWriter& w = *out;
  std::vector<std::string> tokens = TokenizerTokens();
  std::vector<int32_t> types(tokens.size(), 1);  // normal
  types[kSyntheticEosId] = 3;                    // control
  for (int64_t i = kSyntheticTokenizerSize; i < c.vocab_size; ++i) {
    tokens.push_back(baton::StrCat("[PAD", i, "]"));
    types.push_back(5);  // unused
  }
  std::vector<std::string> merges;
  for (const auto& [a, b] : kMerges) merges.push_back(baton::StrCat(a, " ", b));
  w.AddString("tokenizer.ggml.model", "gpt2");
  w.AddString("tokenizer.ggml.pre", "gpt-2");
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddInt32Array("tokenizer.ggml.token_type", types);
  w.AddStringArray("tokenizer.ggml.merges", merges);
  w.AddUint32("tokenizer.ggml.bos_token_id", kSyntheticEosId);
  w.AddUint32("tokenizer.ggml.eos_token_id", kSyntheticEosId);
  w.AddBool("tokenizer.ggml.add_bos_token", false);
  w.AddString("tokenizer.chat_template", kChatTemplate);
}

GgufWriter GgufFile(const SyntheticModelSpec& spec, const ModelConfig& c,
                    const std::vector<Tensor>& plan, const std::string& name) {
  GgufWriter w;
  const std::string arch = c.architecture == "Qwen2ForCausalLM" ? "qwen2" : "llama";
  const std::string p = arch + ".";
  w.AddString("general.architecture", arch);
  w.AddString("general.name", name);
  w.AddUint32("general.file_type", FileType(spec.dtype));
  w.AddUint32(p + "vocab_size", static_cast<uint32_t>(c.vocab_size));
  w.AddUint32(p + "context_length", static_cast<uint32_t>(c.max_position_embeddings));
  w.AddUint32(p + "embedding_length", static_cast<uint32_t>(c.hidden_size));
  w.AddUint32(p + "block_count", static_cast<uint32_t>(c.num_layers));
  w.AddUint32(p + "feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
  w.AddUint32(p + "rope.dimension_count", static_cast<uint32_t>(c.head_dim));
  w.AddUint32(p + "attention.head_count", static_cast<uint32_t>(c.num_heads));
  w.AddUint32(p + "attention.head_count_kv", static_cast<uint32_t>(c.num_kv_heads));
  w.AddUint32(p + "attention.key_length", static_cast<uint32_t>(c.head_dim));
  w.AddUint32(p + "attention.value_length", static_cast<uint32_t>(c.head_dim));
  w.AddFloat32(p + "attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  w.AddFloat32(p + "rope.freq_base", static_cast<float>(c.rope_theta));
  if (c.rope_scaling.type == RopeScaling::Type::kLinear) {
    w.AddString(p + "rope.scaling.type", "linear");
    w.AddFloat32(p + "rope.scaling.factor", static_cast<float>(c.rope_scaling.factor));
  }

  if (c.vocab_size >= kSyntheticTokenizerSize) {
    AddTokenizer(c, &w);
  } else if (!c.eos_token_ids.empty()) {
    w.AddUint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(c.eos_token_ids[0]));
  }
  for (const Tensor& t : plan) {
    const bool permute = t.permute_heads > 0;
    if (IsVector(t)) {
      // llama.cpp keeps 1-D tensors in f32; the values are those of the HF file.
      const cpu::DType rounded = cpu::IsBlockQuantized(spec.dtype) ? cpu::DType::kF32 : spec.dtype;
      const Tensor* tp = &t;
      w.AddTensor(t.gguf_name, {static_cast<uint64_t>(Elements(t))}, GgufType::kF32,
                  Data(spec.seed, tp, cpu::DType::kF32,
                       t.kind == Kind::kConstant ? cpu::DType::kF32 : rounded, permute));
    } else {
      w.AddTensor(t.gguf_name, {static_cast<uint64_t>(t.cols), static_cast<uint64_t>(t.rows)},
                  ToGguf(spec.dtype), Data(spec.seed, &t, spec.dtype, spec.dtype, permute));
    }
  }
  return w;
}

}  // namespace

std::vector<std::string> SyntheticShapeNames() {
  return {"tiny", "smollm2-135m", "llama3.2-1b", "llama3.1-8b"};
}

absl::StatusOr<ModelConfig> SyntheticShape(std::string_view name) {
  ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.name = std::string(name);
  c.rms_norm_eps = 1e-5;
  if (name == "tiny") {
    // Small enough for unit tests; every in-feature count a multiple of 32 for Q8_0, GQA
    // 2:1, untied so both head paths are exercised.
    c.vocab_size = 320;
    c.hidden_size = 64;
    c.intermediate_size = 160;
    c.num_layers = 2;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 16;
    c.max_position_embeddings = 512;
    c.rope_theta = 10000.0;
  } else if (name == "smollm2-135m") {
    c.vocab_size = 49152;
    c.hidden_size = 576;
    c.intermediate_size = 1536;
    c.num_layers = 30;
    c.num_heads = 9;
    c.num_kv_heads = 3;
    c.head_dim = 64;
    c.tie_word_embeddings = true;
    c.rope_theta = 100000.0;
    c.max_position_embeddings = 8192;
  } else if (name == "llama3.2-1b") {
    c.vocab_size = 128256;
    c.hidden_size = 2048;
    c.intermediate_size = 8192;
    c.num_layers = 16;
    c.num_heads = 32;
    c.num_kv_heads = 8;
    c.head_dim = 64;
    c.tie_word_embeddings = true;
    c.rope_theta = 500000.0;
    c.rope_scaling = {.type = RopeScaling::Type::kLlama3,
                      .factor = 32.0,
                      .low_freq_factor = 1.0,
                      .high_freq_factor = 4.0,
                      .original_max_position = 8192};
    c.max_position_embeddings = 131072;
  } else if (name == "llama3.1-8b") {
    // The GPU benchmarks' shape (docs/perf/gpu.md): 16 GB of bf16 weights.
    c.vocab_size = 128256;
    c.hidden_size = 4096;
    c.intermediate_size = 14336;
    c.num_layers = 32;
    c.num_heads = 32;
    c.num_kv_heads = 8;
    c.head_dim = 128;
    c.rope_theta = 500000.0;
    c.rope_scaling = {.type = RopeScaling::Type::kLlama3,
                      .factor = 8.0,
                      .low_freq_factor = 1.0,
                      .high_freq_factor = 4.0,
                      .original_max_position = 8192};
    c.max_position_embeddings = 131072;
  } else {
    std::string names;
    for (const std::string& n : SyntheticShapeNames()) names += (names.empty() ? "" : ", ") + n;
    return absl::InvalidArgumentError(
        baton::StrCat("unknown synthetic model shape '", name, "' (known: ", names, ")"));
  }
  c.bos_token_id = kSyntheticEosId;
  c.eos_token_ids = {kSyntheticEosId};
  return c;
}

std::string SyntheticTokenizerJson() {
  const std::vector<std::string> tokens = TokenizerTokens();
  ordered_json vocab = ordered_json::object();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
  ordered_json merges = ordered_json::array();
  for (const auto& [a, b] : kMerges) merges.push_back({a, b});
  ordered_json byte_level = {{"type", "ByteLevel"},
                             {"add_prefix_space", false},
                             {"trim_offsets", true},
                             {"use_regex", true}};
  ordered_json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = {{{"id", kSyntheticEosId},
                        {"content", kEndOfText},
                        {"single_word", false},
                        {"lstrip", false},
                        {"rstrip", false},
                        {"normalized", false},
                        {"special", true}}};
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = byte_level;
  j["post_processor"] = byte_level;
  j["decoder"] = byte_level;
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", false},
                {"vocab", vocab},
                {"merges", merges}};
  return j.dump(2) + "\n";
}

std::string SyntheticTokenizerConfigJson(int64_t model_max_length) {
  ordered_json j;
  j["add_bos_token"] = false;
  j["add_eos_token"] = false;
  j["added_tokens_decoder"] = {{std::to_string(kSyntheticEosId),
                                {{"content", kEndOfText},
                                 {"lstrip", false},
                                 {"normalized", false},
                                 {"rstrip", false},
                                 {"single_word", false},
                                 {"special", true}}}};
  j["bos_token"] = kEndOfText;
  j["eos_token"] = kEndOfText;
  j["unk_token"] = kEndOfText;
  j["chat_template"] = kChatTemplate;
  j["clean_up_tokenization_spaces"] = false;
  j["model_max_length"] = model_max_length;
  j["tokenizer_class"] = "GPT2Tokenizer";
  return j.dump(2) + "\n";
}

namespace {

// The config actually written: the tokenizer's ids, Qwen2's biases, and every check.
absl::StatusOr<ModelConfig> PrepareConfig(const SyntheticModelSpec& spec, bool with_tokenizer) {
  ModelConfig c = spec.config;
  if (c.architecture != "LlamaForCausalLM" && c.architecture != "MistralForCausalLM" &&
      c.architecture != "Qwen2ForCausalLM") {
    return absl::InvalidArgumentError(baton::StrCat(
        "synthetic models are LlamaForCausalLM, MistralForCausalLM or Qwen2ForCausalLM, not '",
        c.architecture, "'"));
  }
  if (c.architecture == "Qwen2ForCausalLM") c.attention_bias = true;
  if (c.vocab_size >= kSyntheticTokenizerSize) {
    c.bos_token_id = kSyntheticEosId;
    c.eos_token_ids = {kSyntheticEosId};
  } else if (with_tokenizer) {
    return absl::InvalidArgumentError(baton::StrCat("vocab_size ", c.vocab_size,
                                                    " is below the synthetic tokenizer's ",
                                                    kSyntheticTokenizerSize, " tokens"));
  } else {
    c.bos_token_id = -1;
    c.eos_token_ids = {static_cast<int32_t>(c.vocab_size - 1)};
  }
  BATON_RETURN_IF_ERROR(ValidateModelConfig(c, "synthetic model config"));
  const int block = cpu::LayoutOf(spec.dtype).elems;
  if (c.hidden_size % block != 0 || c.intermediate_size % block != 0 ||
      (c.num_heads * c.head_dim) % block != 0) {
    return absl::InvalidArgumentError(baton::StrCat(
        cpu::DTypeName(spec.dtype), " needs hidden_size, intermediate_size and heads*head_dim ",
        "to be multiples of ", block));
  }
  return c;
}

absl::Status RefuseQ8ForHf(const SyntheticModelSpec& spec) {
  if (!cpu::IsBlockQuantized(spec.dtype)) return absl::OkStatus();
  return absl::InvalidArgumentError(baton::StrCat(
      cpu::DTypeName(spec.dtype),
      " is a GGUF type; safetensors has none (write GGUF only, or pick f32/f16/bf16)"));
}

bool GgufPermutes(const ModelConfig& c) { return c.architecture != "Qwen2ForCausalLM"; }

}  // namespace

absl::StatusOr<std::string> SyntheticConfigJson(const SyntheticModelSpec& spec) {
  BATON_ASSIGN_OR_RETURN(ModelConfig c, PrepareConfig(spec, /*with_tokenizer=*/false));
  return ConfigJson(c, spec.dtype);
}

absl::StatusOr<std::string> SyntheticSafetensorsBytes(const SyntheticModelSpec& spec) {
  BATON_RETURN_IF_ERROR(RefuseQ8ForHf(spec));
  BATON_ASSIGN_OR_RETURN(ModelConfig c, PrepareConfig(spec, /*with_tokenizer=*/false));
  const std::vector<Tensor> plan = Plan(c, /*gguf_permutes=*/false);
  return HfWriter(spec, plan).WriteString();
}

absl::StatusOr<std::string> SyntheticGgufBytes(const SyntheticModelSpec& spec) {
  BATON_ASSIGN_OR_RETURN(ModelConfig c, PrepareConfig(spec, /*with_tokenizer=*/false));
  const std::vector<Tensor> plan = Plan(c, GgufPermutes(c));
  return GgufFile(spec, c, plan, spec.name.empty() ? "synthetic" : spec.name).WriteString();
}

absl::Status WriteSyntheticModel(const SyntheticModelSpec& spec, const std::string& out_dir) {
  namespace fs = std::filesystem;
  if (!spec.write_hf && !spec.write_gguf) {
    return absl::InvalidArgumentError("nothing to write: neither HF nor GGUF requested");
  }
  if (spec.write_hf) BATON_RETURN_IF_ERROR(RefuseQ8ForHf(spec));
  BATON_ASSIGN_OR_RETURN(ModelConfig c, PrepareConfig(spec, /*with_tokenizer=*/true));

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        baton::StrCat("cannot create directory '", out_dir, "': ", ec.message()));
  }
  const fs::path dir(out_dir);
  std::string name = spec.name;
  if (name.empty()) name = (dir.filename().empty() ? dir.parent_path() : dir).filename().string();

  const std::vector<Tensor> hf_plan = Plan(c, /*gguf_permutes=*/false);
  const std::vector<Tensor> gguf_plan = Plan(c, GgufPermutes(c));
  std::optional<SafetensorsWriter> hf;
  std::optional<GgufWriter> gguf;
  uint64_t total = 0;
  if (spec.write_hf) {
    hf = HfWriter(spec, hf_plan);
    total += hf->FileSize();
  }
  if (spec.write_gguf) {
    gguf = GgufFile(spec, c, gguf_plan, name);
    total += gguf->FileSize();
  }
  uint64_t base = 0;
  auto progress = [&](uint64_t done, uint64_t) {
    if (spec.progress) spec.progress(base + done, total);
  };
  if (hf) {
    BATON_RETURN_IF_ERROR(WriteText(dir / "config.json", ConfigJson(c, spec.dtype)));
    BATON_RETURN_IF_ERROR(WriteText(dir / "generation_config.json", GenerationConfigJson(c)));
    BATON_RETURN_IF_ERROR(WriteText(dir / "tokenizer.json", SyntheticTokenizerJson()));
    BATON_RETURN_IF_ERROR(WriteText(dir / "tokenizer_config.json",
                                    SyntheticTokenizerConfigJson(c.max_position_embeddings)));
    BATON_RETURN_IF_ERROR(hf->WriteFile((dir / "model.safetensors").string(), progress));
    base += hf->FileSize();
  }
  if (gguf) BATON_RETURN_IF_ERROR(gguf->WriteFile((dir / "model.gguf").string(), progress));
  return absl::OkStatus();
}

}  // namespace baton::modelgen
