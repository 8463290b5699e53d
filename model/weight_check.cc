#include "model/weight_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "common/status.h"
#include "common/strings.h"
#include "kernels/cpu/quant_blocks.h"
#include "model/float_convert.h"

namespace baton::model {
namespace {

// NaN and Inf are the values whose exponent bits are all ones; testing the bits needs no
// conversion and raises no floating-point exceptions.
bool NonFiniteF32(uint32_t bits) { return (bits & 0x7f800000u) == 0x7f800000u; }
bool NonFiniteF16(uint16_t bits) { return (bits & 0x7c00u) == 0x7c00u; }
bool NonFiniteBf16(uint16_t bits) { return (bits & 0x7f80u) == 0x7f80u; }

template <typename Bits>
Bits LoadBits(const char* p) {
  Bits b;
  std::memcpy(&b, p, sizeof(Bits));
  return b;
}

// Index of the first of `n` values (each `stride` bytes apart, its bits at the start)
// that is not finite, or -1. A branch-free pass over each chunk finds whether it holds
// one (the compiler vectorizes it); only such a chunk is searched element by element.
template <typename Bits, bool (*NonFinite)(Bits), size_t stride = sizeof(Bits)>
int64_t FirstNonFinite(const char* data, int64_t n) {
  constexpr int64_t kChunk = 4096;
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t end = std::min(n, begin + kChunk);
    bool any = false;
    for (int64_t i = begin; i < end; ++i) any |= NonFinite(LoadBits<Bits>(data + i * stride));
    if (!any) continue;
    for (int64_t i = begin; i < end; ++i) {
      if (NonFinite(LoadBits<Bits>(data + i * stride))) return i;
    }
  }
  return -1;
}

const char* Describe(float v) {
  if (std::isnan(v)) return "NaN";
  return v > 0 ? "+Inf" : "-Inf";
}

class Checker {
 public:
  Checker(TensorNaming naming, std::string_view source) : naming_(naming), source_(source) {}

  absl::Status Matrix(const std::string& name, const cpu::MatrixRef& m) const {
    if (m.data == nullptr || m.rows == 0 || m.cols == 0) return absl::OkStatus();  // unbound
    const char* p = static_cast<const char*>(m.data);
    const int64_t n = m.rows * m.cols;
    int64_t bad = -1;
    float value = 0;
    switch (m.dtype) {
      case cpu::DType::kF32:
        bad = FirstNonFinite<uint32_t, NonFiniteF32>(p, n);
        if (bad >= 0) std::memcpy(&value, p + 4 * bad, 4);
        break;
      case cpu::DType::kF16:
        bad = FirstNonFinite<uint16_t, NonFiniteF16>(p, n);
        if (bad >= 0) value = F16ToF32(LoadBits<uint16_t>(p + 2 * bad));
        break;
      case cpu::DType::kBF16:
        bad = FirstNonFinite<uint16_t, NonFiniteBf16>(p, n);
        if (bad >= 0) value = Bf16ToF32(LoadBits<uint16_t>(p + 2 * bad));
        break;
      default:
        return BlockScales(name, m);
    }
    if (bad < 0) return absl::OkStatus();
    return Error(name, baton::StrCat("(", cpu::DTypeName(m.dtype), ", [", m.rows, ", ", m.cols,
                                     "]) holds ", Describe(value), " at element ", bad, " (row ",
                                     bad / m.cols, ", column ", bad % m.cols, ")"));
  }

  // Quantized rows are whole blocks (cols is a multiple of the block), so the matrix is
  // one run of blocks; of their bytes only the f16 scales can be NaN or Inf.
  absl::Status BlockScales(const std::string& name, const cpu::MatrixRef& m) const {
    const cpu::BlockLayout layout = cpu::LayoutOf(m.dtype);
    const char* p = static_cast<const char*>(m.data);
    const int64_t blocks = m.rows * m.cols / layout.elems;
    for (int64_t block = 0; block < blocks; ++block) {
      for (int offset : layout.scale_offsets) {
        if (offset < 0) continue;
        const auto bits = LoadBits<uint16_t>(p + block * layout.bytes + offset);
        if (!NonFiniteF16(bits)) continue;
        const int64_t first = block * layout.elems, col = first % m.cols;
        return Error(name, baton::StrCat("(", cpu::DTypeName(m.dtype), ", [", m.rows, ", ", m.cols,
                                         "]) holds ", Describe(F16ToF32(bits)),
                                         " as a scale of the block of elements ", first, "-",
                                         first + layout.elems - 1, " (row ", first / m.cols,
                                         ", columns ", col, "-", col + layout.elems - 1, ")"));
      }
    }
    return absl::OkStatus();
  }

  // Vectors were widened to f32 at load; a NaN or Inf in the file survives that.
  absl::Status Vector(const std::string& name, const std::vector<float>& v) const {
    const int64_t bad = FirstNonFinite<uint32_t, NonFiniteF32>(
        reinterpret_cast<const char*>(v.data()), static_cast<int64_t>(v.size()));
    if (bad < 0) return absl::OkStatus();
    return Error(name,
                 baton::StrCat("([", v.size(), "]) holds ", Describe(v[bad]), " at element ", bad));
  }

  absl::Status Linear(const std::string& weight_name, const model::Linear& l) const {
    BATON_RETURN_IF_ERROR(Matrix(weight_name, l.weight));
    return Vector(LayerNames::Bias(weight_name), l.bias);
  }

  bool gguf() const { return naming_ == TensorNaming::kGguf; }

 private:
  absl::Status Error(const std::string& name, std::string_view what) const {
    return absl::InvalidArgumentError(baton::StrCat(source_, source_.empty() ? "" : ": ",
                                                    "tensor '", name, "' ", what,
                                                    "; the weights are corrupted"));
  }

  TensorNaming naming_;
  std::string_view source_;
};

absl::Status CheckLayer(const Checker& c, TensorNaming naming, int64_t i, const LayerWeights& l) {
  const LayerNames n = NamesFor(naming, i);
  BATON_RETURN_IF_ERROR(c.Vector(n.attn_norm, l.attn_norm));
  BATON_RETURN_IF_ERROR(c.Linear(n.q, l.q));
  BATON_RETURN_IF_ERROR(c.Linear(n.k, l.k));
  BATON_RETURN_IF_ERROR(c.Linear(n.v, l.v));
  BATON_RETURN_IF_ERROR(c.Linear(n.o, l.o));
  BATON_RETURN_IF_ERROR(c.Vector(n.mlp_norm, l.mlp_norm));
  BATON_RETURN_IF_ERROR(c.Linear(n.gate, l.gate));
  BATON_RETURN_IF_ERROR(c.Linear(n.up, l.up));
  return c.Linear(n.down, l.down);
}

absl::Status Check(const Weights& w, TensorNaming naming, std::string_view source) {
  const Checker c(naming, source);
  const bool gguf = c.gguf();
  BATON_RETURN_IF_ERROR(
      c.Matrix(gguf ? "token_embd.weight" : "model.embed_tokens.weight", w.embedding));
  for (size_t i = 0; i < w.layers.size(); ++i) {
    BATON_RETURN_IF_ERROR(CheckLayer(c, naming, static_cast<int64_t>(i), w.layers[i]));
  }
  BATON_RETURN_IF_ERROR(c.Vector(gguf ? "output_norm.weight" : "model.norm.weight", w.final_norm));
  if (w.lm_head.data != w.embedding.data) {  // a tied head is the embedding, checked above
    BATON_RETURN_IF_ERROR(c.Matrix(gguf ? "output.weight" : "lm_head.weight", w.lm_head));
  }
  return c.Vector("rope_freqs.weight", w.rope_freq_factors);
}

}  // namespace

absl::Status CheckWeightsFinite(const Weights& weights, TensorNaming naming) {
  return Check(weights, naming, "");
}

absl::Status CheckWeightsFinite(const Model& model) {
  const TensorNaming naming = model.format() == "gguf" ? TensorNaming::kGguf : TensorNaming::kHf;
  return Check(model.weights(), naming, model.path());
}

}  // namespace baton::model
