#include "model/model_config.h"

#include <cmath>

#include "common/status.h"
#include "common/strings.h"

namespace baton::model {
namespace {

absl::Status Bad(const std::string& source, std::string_view what) {
  return absl::InvalidArgumentError(baton::StrCat(source, ": ", what));
}

absl::Status CheckRange(const std::string& source, std::string_view field, int64_t value,
                        int64_t min, int64_t max) {
  if (value >= min && value <= max) return absl::OkStatus();
  return Bad(source, baton::StrCat(field, " = ", value, " is outside [", min, ", ", max, "]"));
}

absl::Status CheckPositiveFinite(const std::string& source, std::string_view field, double value,
                                 double max) {
  if (std::isfinite(value) && value > 0 && value <= max) return absl::OkStatus();
  return Bad(source,
             baton::StrCat(field, " = ", value, " must be positive, finite and at most ", max));
}

absl::Status CheckTokenId(const std::string& source, std::string_view field, int64_t id,
                          int64_t vocab) {
  if (id >= 0 && id < vocab) return absl::OkStatus();
  return Bad(source,
             baton::StrCat(field, " = ", id, " is outside the vocabulary [0, ", vocab, ")"));
}

}  // namespace

absl::Status ValidateModelConfig(const ModelConfig& c, const std::string& source) {
  using L = ConfigLimits;
  BATON_RETURN_IF_ERROR(CheckRange(source, "vocab_size", c.vocab_size, 1, L::kMaxVocab));
  BATON_RETURN_IF_ERROR(CheckRange(source, "hidden_size", c.hidden_size, 1, L::kMaxHidden));
  BATON_RETURN_IF_ERROR(
      CheckRange(source, "intermediate_size", c.intermediate_size, 1, L::kMaxIntermediate));
  BATON_RETURN_IF_ERROR(CheckRange(source, "num_hidden_layers", c.num_layers, 1, L::kMaxLayers));
  BATON_RETURN_IF_ERROR(CheckRange(source, "num_attention_heads", c.num_heads, 1, L::kMaxHeads));
  BATON_RETURN_IF_ERROR(CheckRange(source, "num_key_value_heads", c.num_kv_heads, 1, c.num_heads));
  if (c.num_heads % c.num_kv_heads != 0) {
    return Bad(source,
               baton::StrCat("num_attention_heads (", c.num_heads,
                             ") is not a multiple of num_key_value_heads (", c.num_kv_heads, ")"));
  }
  BATON_RETURN_IF_ERROR(CheckRange(source, "head_dim", c.head_dim, 2, L::kMaxHeadDim));
  if (c.head_dim % 2 != 0) {
    return Bad(source, baton::StrCat("head_dim = ", c.head_dim,
                                     " is odd; RoPE rotates pairs of dimensions"));
  }
  BATON_RETURN_IF_ERROR(
      CheckRange(source, "max_position_embeddings", c.max_position_embeddings, 1, L::kMaxContext));
  // eps is added to a mean of squares: anything near 1 or above would flatten the norm.
  if (!(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps > 0 && c.rms_norm_eps < 1)) {
    return Bad(source, baton::StrCat("rms_norm_eps = ", c.rms_norm_eps, " must lie in (0, 1)"));
  }
  BATON_RETURN_IF_ERROR(CheckPositiveFinite(source, "rope_theta", c.rope_theta, 1e12));
  const RopeScaling& r = c.rope_scaling;
  if (r.type != RopeScaling::Type::kNone) {
    BATON_RETURN_IF_ERROR(CheckPositiveFinite(source, "rope_scaling.factor", r.factor, 1e6));
  }
  if (r.type == RopeScaling::Type::kLlama3) {
    BATON_RETURN_IF_ERROR(
        CheckPositiveFinite(source, "rope_scaling.low_freq_factor", r.low_freq_factor, 1e6));
    BATON_RETURN_IF_ERROR(
        CheckPositiveFinite(source, "rope_scaling.high_freq_factor", r.high_freq_factor, 1e6));
    // The smoothing between the two wavelength bands divides by their difference.
    if (!(r.high_freq_factor > r.low_freq_factor)) {
      return Bad(source, baton::StrCat("rope_scaling.high_freq_factor (", r.high_freq_factor,
                                       ") must exceed low_freq_factor (", r.low_freq_factor, ")"));
    }
    BATON_RETURN_IF_ERROR(CheckRange(source, "rope_scaling.original_max_position_embeddings",
                                     r.original_max_position, 1, L::kMaxContext));
  }
  if (c.bos_token_id != -1) {
    BATON_RETURN_IF_ERROR(CheckTokenId(source, "bos_token_id", c.bos_token_id, c.vocab_size));
  }
  for (int32_t id : c.eos_token_ids) {
    BATON_RETURN_IF_ERROR(CheckTokenId(source, "eos_token_id", id, c.vocab_size));
  }
  return absl::OkStatus();
}

}  // namespace baton::model
