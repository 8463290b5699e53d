#include "model/gguf_config.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "common/strings.h"

namespace baton::model {
namespace {

absl::Status Bad(std::string_view source, std::string_view what) {
  return absl::InvalidArgumentError(baton::StrCat(source, ": ", what));
}

// The gguf getters name the key; prefix the file and keep InvalidArgument.
absl::Status Wrap(std::string_view source, const absl::Status& status) {
  return absl::InvalidArgumentError(baton::StrCat(source, ": ", status.message()));
}

// GetUint/GetInt/GetFloat already name the key when its type is wrong; a missing key is
// NotFound, which reads better as InvalidArgument naming the file.
absl::Status ReadUint(const gguf::File& f, const std::string& key, bool required, int64_t* out,
                      std::string_view source) {
  if (!f.Has(key)) {
    if (required) return Bad(source, baton::StrCat("metadata key '", key, "' is missing"));
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> v = f.GetUint(key);
  if (!v.ok()) return Wrap(source, v.status());
  // ConfigLimits are far below this; the bound only keeps the cast meaningful.
  if (*v > (uint64_t{1} << 40)) {
    return Bad(source, baton::StrCat("metadata key '", key, "' = ", *v, " is absurdly large"));
  }
  *out = static_cast<int64_t>(*v);
  return absl::OkStatus();
}

absl::Status ReadFloat(const gguf::File& f, const std::string& key, bool required, double* out,
                       std::string_view source) {
  if (!f.Has(key)) {
    if (required) return Bad(source, baton::StrCat("metadata key '", key, "' is missing"));
    return absl::OkStatus();
  }
  absl::StatusOr<double> v = f.GetFloat(key);
  if (!v.ok()) return Wrap(source, v.status());
  *out = *v;
  return absl::OkStatus();
}

// llama.cpp writes "no such token" as -1 or as uint32 0xFFFFFFFF; both mean absent.
absl::StatusOr<int64_t> OptionalTokenId(const gguf::File& f, const std::string& key,
                                        std::string_view source) {
  if (!f.Has(key)) return -1;
  absl::StatusOr<int64_t> v = f.GetInt(key);
  if (!v.ok()) return Wrap(source, v.status());
  if (*v == -1 || *v == 0xFFFFFFFF) return -1;
  if (*v < 0 || *v > INT32_MAX) {
    return Bad(source, baton::StrCat("metadata key '", key, "' = ", *v, " is not a token id"));
  }
  return *v;
}

}  // namespace

absl::StatusOr<ModelConfig> ConfigFromGguf(const gguf::File& f, std::string_view source) {
  if (!f.Has("general.architecture")) {
    return Bad(source, "metadata key 'general.architecture' is missing");
  }
  absl::StatusOr<std::string_view> arch_or = f.GetString("general.architecture");
  if (!arch_or.ok()) return Wrap(source, arch_or.status());
  const std::string arch(*arch_or);
  if (arch != "llama" && arch != "mistral" && arch != "qwen2") {
    return absl::InvalidArgumentError(baton::StrCat(source, ": unsupported architecture ",
                                                    arch.substr(0, 64),
                                                    "; supported: ", kSupportedGgufArchitectures));
  }
  ModelConfig c;
  c.architecture = arch;
  if (f.Has("general.name")) {
    absl::StatusOr<std::string_view> name = f.GetString("general.name");
    if (name.ok()) c.name = std::string(name->substr(0, 256));
  }
  // llama.cpp permutes Q/K rows of llama-family models on conversion so that rotary pairs
  // sit next to each other; qwen2 keeps the HF order and runs NEOX-style rope.
  c.rope_layout = arch == "qwen2" ? RopeLayout::kHalf : RopeLayout::kInterleaved;
  c.attention_bias = arch == "qwen2";

  const std::string p = arch + ".";
  BATON_RETURN_IF_ERROR(
      ReadUint(f, p + "context_length", true, &c.max_position_embeddings, source));
  BATON_RETURN_IF_ERROR(ReadUint(f, p + "embedding_length", true, &c.hidden_size, source));
  BATON_RETURN_IF_ERROR(ReadUint(f, p + "feed_forward_length", true, &c.intermediate_size, source));
  BATON_RETURN_IF_ERROR(ReadUint(f, p + "block_count", true, &c.num_layers, source));
  BATON_RETURN_IF_ERROR(ReadUint(f, p + "attention.head_count", true, &c.num_heads, source));
  c.num_kv_heads = c.num_heads;
  BATON_RETURN_IF_ERROR(ReadUint(f, p + "attention.head_count_kv", false, &c.num_kv_heads, source));
  BATON_RETURN_IF_ERROR(
      ReadFloat(f, p + "attention.layer_norm_rms_epsilon", true, &c.rms_norm_eps, source));
  c.rope_theta = 10000.0;  // llama.cpp's default when the key is absent
  BATON_RETURN_IF_ERROR(ReadFloat(f, p + "rope.freq_base", false, &c.rope_theta, source));

  int64_t key_length = 0, value_length = 0, rope_dims = 0;
  BATON_RETURN_IF_ERROR(ReadUint(f, p + "attention.key_length", false, &key_length, source));
  BATON_RETURN_IF_ERROR(ReadUint(f, p + "attention.value_length", false, &value_length, source));
  BATON_RETURN_IF_ERROR(ReadUint(f, p + "rope.dimension_count", false, &rope_dims, source));
  if (key_length > 0) {
    c.head_dim = key_length;
  } else if (c.num_heads > 0 && c.hidden_size % c.num_heads == 0) {
    c.head_dim = c.hidden_size / c.num_heads;
  } else {
    return Bad(source, baton::StrCat(p, "embedding_length (", c.hidden_size,
                                     ") is not a multiple of ", p, "attention.head_count (",
                                     c.num_heads, ") and there is no ", p, "attention.key_length"));
  }
  if (value_length > 0 && value_length != c.head_dim) {
    return Bad(source,
               baton::StrCat(p, "attention.value_length (", value_length,
                             ") differs from the key length (", c.head_dim, "); not supported"));
  }
  // Partial rotary embeddings (rotating fewer dims than the head) are not supported.
  if (rope_dims > 0 && rope_dims != c.head_dim) {
    return Bad(source,
               baton::StrCat(p, "rope.dimension_count (", rope_dims, ") differs from head_dim (",
                             c.head_dim, "); partial rotary embeddings are not supported"));
  }

  const std::string scaling_key = p + "rope.scaling.type";
  if (f.Has(scaling_key)) {
    absl::StatusOr<std::string_view> type = f.GetString(scaling_key);
    if (!type.ok()) return Wrap(source, type.status());
    if (*type == "linear") {
      c.rope_scaling.type = RopeScaling::Type::kLinear;
      BATON_RETURN_IF_ERROR(
          ReadFloat(f, p + "rope.scaling.factor", true, &c.rope_scaling.factor, source));
    } else if (*type != "none") {
      return Bad(source, baton::StrCat(scaling_key, " '", type->substr(0, 64),
                                       "' is not supported (supported: none, linear)"));
    }
  }

  if (f.Has(p + "vocab_size")) {
    BATON_RETURN_IF_ERROR(ReadUint(f, p + "vocab_size", true, &c.vocab_size, source));
  } else if (f.Has("tokenizer.ggml.tokens")) {
    absl::StatusOr<uint64_t> n = f.ArrayLength("tokenizer.ggml.tokens");
    if (!n.ok()) return Wrap(source, n.status());
    c.vocab_size = static_cast<int64_t>(*n);
  } else {
    return Bad(source, baton::StrCat("neither '", p,
                                     "vocab_size' nor 'tokenizer.ggml.tokens' gives the "
                                     "vocabulary size"));
  }

  BATON_ASSIGN_OR_RETURN(int64_t bos, OptionalTokenId(f, "tokenizer.ggml.bos_token_id", source));
  c.bos_token_id = static_cast<int32_t>(bos);
  // End of generation: EOS, and the end-of-turn / end-of-message tokens that Llama 3
  // GGUFs name separately (llama.cpp stops on all of them).
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    BATON_ASSIGN_OR_RETURN(int64_t id, OptionalTokenId(f, key, source));
    if (id >= 0 &&
        std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end()) {
      c.eos_token_ids.push_back(static_cast<int32_t>(id));
    }
  }
  BATON_RETURN_IF_ERROR(ValidateModelConfig(c, std::string(source)));
  return c;
}

}  // namespace baton::model
