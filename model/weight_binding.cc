#include "model/weight_binding.h"

#include <cstring>
#include <unordered_set>

#include "common/status.h"
#include "common/strings.h"
#include "kernels/cpu/quant_blocks.h"
#include "model/float_convert.h"

namespace baton::model {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += baton::StrCat(i ? ", " : "", shape[i]);
  return out + "]";
}

size_t ElementAlignment(cpu::DType dtype) {
  switch (dtype) {
    case cpu::DType::kF32:
      return 4;
    case cpu::DType::kF16:
    case cpu::DType::kBF16:
      return 2;
    default:
      return 1;  // blocks of 18 to 210 bytes; kernels read their scales with memcpy
  }
}

class Binder {
 public:
  Binder(const TensorTable& table, TensorNaming naming, uint64_t* bytes)
      : table_(table), naming_(naming), bytes_(bytes) {}

  bool Has(const std::string& name) const { return table_.contains(name); }

  // A matrix [rows, cols] used in place.
  absl::Status Matrix(const std::string& name, int64_t rows, int64_t cols, std::string_view what,
                      cpu::MatrixRef* out) {
    BATON_ASSIGN_OR_RETURN(const TensorEntry* t, Find(name));
    BATON_RETURN_IF_ERROR(CheckShape(name, *t, {rows, cols}, what));
    const cpu::DType dtype = *t->dtype;
    const int block = cpu::LayoutOf(dtype).elems;
    if (cols % block != 0) {
      return Error(name, *t,
                   baton::StrCat("is ", cpu::DTypeName(dtype), " with ", cols,
                                 " columns, not a multiple of its ", block, "-value block"));
    }
    const uint64_t expected = static_cast<uint64_t>(rows) * cpu::RowBytes(dtype, cols);
    if (t->data.size() != expected) {
      return Error(name, *t,
                   baton::StrCat("holds ", t->data.size(), " bytes; ", ShapeText(t->shape), " of ",
                                 cpu::DTypeName(dtype), " needs ", expected));
    }
    BATON_RETURN_IF_ERROR(CheckAligned(name, *t, ElementAlignment(dtype)));
    *out = cpu::MatrixRef{.dtype = dtype, .data = t->data.data(), .rows = rows, .cols = cols};
    Count(*t);
    return absl::OkStatus();
  }

  // A vector of n values, widened to owned f32.
  absl::Status Vector(const std::string& name, int64_t n, std::string_view what,
                      std::vector<float>* out) {
    BATON_ASSIGN_OR_RETURN(const TensorEntry* t, Find(name));
    BATON_RETURN_IF_ERROR(CheckShape(name, *t, {n}, what));
    const cpu::DType dtype = *t->dtype;
    if (cpu::IsBlockQuantized(dtype)) {
      return Error(name, *t,
                   baton::StrCat("is ", cpu::DTypeName(dtype),
                                 "; vectors (norms, biases) must be f32, f16 or bf16"));
    }
    const uint64_t size = static_cast<uint64_t>(n) * (dtype == cpu::DType::kF32 ? 4 : 2);
    if (t->data.size() != size) {
      return Error(name, *t,
                   baton::StrCat("holds ", t->data.size(), " bytes; ", n, " values of ",
                                 cpu::DTypeName(dtype), " need ", size));
    }
    out->resize(static_cast<size_t>(n));
    const char* p = t->data.data();
    for (int64_t i = 0; i < n; ++i) {
      if (dtype == cpu::DType::kF32) {
        std::memcpy(&(*out)[i], p + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        (*out)[i] = dtype == cpu::DType::kF16 ? F16ToF32(h) : Bf16ToF32(h);
      }
    }
    Count(*t);
    return absl::OkStatus();
  }

  absl::Status Missing(const std::string& name, std::string_view why) const {
    return absl::InvalidArgumentError(
        baton::StrCat("tensor '", name, "' is missing from the model files (", why, ")"));
  }

 private:
  absl::StatusOr<const TensorEntry*> Find(const std::string& name) const {
    auto it = table_.find(name);
    if (it == table_.end()) return Missing(name, "the architecture needs it");
    const TensorEntry& t = it->second;
    if (!t.dtype.has_value()) {
      return Error(
          name, t,
          baton::StrCat("has type ", t.type_name,
                        ", which is not supported (supported: f32, f16, bf16",
                        naming_ == TensorNaming::kGguf
                            ? ", q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K)"
                            : ")"));
    }
    return &t;
  }

  absl::Status CheckShape(const std::string& name, const TensorEntry& t,
                          const std::vector<int64_t>& expected, std::string_view what) const {
    if (t.shape == expected) return absl::OkStatus();
    // GGUF lists dims innermost first; say so, since a user comparing with gguf-dump sees
    // them reversed.
    const char* order =
        naming_ == TensorNaming::kGguf ? " (outermost first; GGUF lists them reversed)" : "";
    return Error(name, t,
                 baton::StrCat("has shape ", ShapeText(t.shape), ", expected ", ShapeText(expected),
                               order, " from the config: ", what));
  }

  absl::Status CheckAligned(const std::string& name, const TensorEntry& t, size_t align) const {
    if (reinterpret_cast<uintptr_t>(t.data.data()) % align == 0) return absl::OkStatus();
    return Error(name, t, baton::StrCat("data is not aligned to ", align, " bytes"));
  }

  absl::Status Error(const std::string& name, const TensorEntry& t, std::string_view what) const {
    return absl::InvalidArgumentError(baton::StrCat(t.file, ": tensor '", name, "' ", what));
  }

  void Count(const TensorEntry& t) {
    if (seen_.insert(t.data.data()).second) *bytes_ += t.data.size();
  }

  const TensorTable& table_;
  TensorNaming naming_;
  uint64_t* bytes_;
  std::unordered_set<const void*> seen_;
};

}  // namespace

LayerNames NamesFor(TensorNaming naming, int64_t i) {
  if (naming == TensorNaming::kHf) {
    const std::string p = baton::StrCat("model.layers.", i, ".");
    return {p + "input_layernorm.weight",  p + "self_attn.q_proj.weight",
            p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight",
            p + "self_attn.o_proj.weight", p + "post_attention_layernorm.weight",
            p + "mlp.gate_proj.weight",    p + "mlp.up_proj.weight",
            p + "mlp.down_proj.weight"};
  }
  const std::string p = baton::StrCat("blk.", i, ".");
  return {p + "attn_norm.weight", p + "attn_q.weight",      p + "attn_k.weight",
          p + "attn_v.weight",    p + "attn_output.weight", p + "ffn_norm.weight",
          p + "ffn_gate.weight",  p + "ffn_up.weight",      p + "ffn_down.weight"};
}

absl::StatusOr<Weights> BindWeights(ModelConfig* config, const TensorTable& table,
                                    TensorNaming naming, uint64_t* weight_bytes) {
  ModelConfig& c = *config;
  *weight_bytes = 0;
  Binder b(table, naming, weight_bytes);
  const bool hf = naming == TensorNaming::kHf;
  const int64_t q_rows = c.num_heads * c.head_dim;
  const int64_t kv_rows = c.num_kv_heads * c.head_dim;
  if (!hf && b.Has("blk.0.attn_q.bias")) c.attention_bias = true;

  Weights w;
  BATON_RETURN_IF_ERROR(b.Matrix(hf ? "model.embed_tokens.weight" : "token_embd.weight",
                                 c.vocab_size, c.hidden_size, "[vocab_size, hidden_size]",
                                 &w.embedding));
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const LayerNames n = NamesFor(naming, i);
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    BATON_RETURN_IF_ERROR(b.Vector(n.attn_norm, c.hidden_size, "[hidden_size]", &l.attn_norm));
    BATON_RETURN_IF_ERROR(b.Matrix(n.q, q_rows, c.hidden_size,
                                   "[num_attention_heads * head_dim, hidden_size]", &l.q.weight));
    BATON_RETURN_IF_ERROR(b.Matrix(n.k, kv_rows, c.hidden_size,
                                   "[num_key_value_heads * head_dim, hidden_size]", &l.k.weight));
    BATON_RETURN_IF_ERROR(b.Matrix(n.v, kv_rows, c.hidden_size,
                                   "[num_key_value_heads * head_dim, hidden_size]", &l.v.weight));
    BATON_RETURN_IF_ERROR(b.Matrix(n.o, c.hidden_size, q_rows,
                                   "[hidden_size, num_attention_heads * head_dim]", &l.o.weight));
    for (auto [lin, rows, what] : {std::tuple{&l.q, q_rows, "[num_attention_heads * head_dim]"},
                                   std::tuple{&l.k, kv_rows, "[num_key_value_heads * head_dim]"},
                                   std::tuple{&l.v, kv_rows, "[num_key_value_heads * head_dim]"}}) {
      const std::string& weight = lin == &l.q ? n.q : lin == &l.k ? n.k : n.v;
      const std::string bias = n.Bias(weight);
      if (c.attention_bias && !b.Has(bias)) {
        return b.Missing(bias, "the config says the attention has biases");
      }
      if (b.Has(bias)) BATON_RETURN_IF_ERROR(b.Vector(bias, rows, what, &lin->bias));
    }
    if (b.Has(n.Bias(n.o))) {
      BATON_RETURN_IF_ERROR(b.Vector(n.Bias(n.o), c.hidden_size, "[hidden_size]", &l.o.bias));
    }
    BATON_RETURN_IF_ERROR(b.Vector(n.mlp_norm, c.hidden_size, "[hidden_size]", &l.mlp_norm));
    BATON_RETURN_IF_ERROR(b.Matrix(n.gate, c.intermediate_size, c.hidden_size,
                                   "[intermediate_size, hidden_size]", &l.gate.weight));
    BATON_RETURN_IF_ERROR(b.Matrix(n.up, c.intermediate_size, c.hidden_size,
                                   "[intermediate_size, hidden_size]", &l.up.weight));
    BATON_RETURN_IF_ERROR(b.Matrix(n.down, c.hidden_size, c.intermediate_size,
                                   "[hidden_size, intermediate_size]", &l.down.weight));
  }
  BATON_RETURN_IF_ERROR(b.Vector(hf ? "model.norm.weight" : "output_norm.weight", c.hidden_size,
                                 "[hidden_size]", &w.final_norm));
  if (hf) {
    // transformers ties the head to the embedding whenever the config says so, even if
    // the checkpoint also carries an lm_head.weight.
    if (c.tie_word_embeddings) {
      w.lm_head = w.embedding;
    } else if (!b.Has("lm_head.weight")) {
      return b.Missing("lm_head.weight", "tie_word_embeddings is false");
    } else {
      BATON_RETURN_IF_ERROR(b.Matrix("lm_head.weight", c.vocab_size, c.hidden_size,
                                     "[vocab_size, hidden_size]", &w.lm_head));
    }
  } else {
    // llama.cpp writes no output.weight for tied models.
    c.tie_word_embeddings = !b.Has("output.weight");
    if (c.tie_word_embeddings) {
      w.lm_head = w.embedding;
    } else {
      BATON_RETURN_IF_ERROR(b.Matrix("output.weight", c.vocab_size, c.hidden_size,
                                     "[vocab_size, hidden_size]", &w.lm_head));
    }
    if (b.Has("rope_freqs.weight")) {
      BATON_RETURN_IF_ERROR(
          b.Vector("rope_freqs.weight", c.head_dim / 2, "[head_dim / 2]", &w.rope_freq_factors));
      for (float f : w.rope_freq_factors) {
        // They divide frequencies: zero, negative or NaN would make the rotation garbage.
        if (!(f > 0 && f < 1e30f)) {
          return absl::InvalidArgumentError(
              baton::StrCat("tensor 'rope_freqs.weight' holds ", f,
                            "; RoPE factors must be positive and finite"));
        }
      }
    }
  }
  return w;
}

}  // namespace baton::model
