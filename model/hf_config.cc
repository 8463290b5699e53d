#include "model/hf_config.h"

#include <cmath>
#include <limits>
#include <string>

#include "common/status.h"
#include "common/strings.h"
#include "nlohmann/json.hpp"

namespace baton::model {
namespace {

using nlohmann::json;

absl::Status Bad(std::string_view source, std::string_view what) {
  return absl::InvalidArgumentError(baton::StrCat(source, ": ", what));
}

bool Present(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

// An integer field. JSON writers sometimes emit 4096.0; an integral float is accepted.
absl::Status ReadInt(const json& j, const char* key, bool required, int64_t* out,
                     std::string_view source) {
  if (!Present(j, key)) {
    if (required) return Bad(source, baton::StrCat("'", key, "' is missing"));
    return absl::OkStatus();
  }
  const json& v = j[key];
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() &&
        v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Bad(source, baton::StrCat("'", key, "' = ", v.get<uint64_t>(), " is too large"));
    }
    *out = v.get<int64_t>();
    return absl::OkStatus();
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
      *out = static_cast<int64_t>(d);
      return absl::OkStatus();
    }
  }
  return Bad(source, baton::StrCat("'", key, "' must be an integer, not ", v.dump()));
}

absl::Status ReadDouble(const json& j, const char* key, bool required, double* out,
                        std::string_view source) {
  if (!Present(j, key)) {
    if (required) return Bad(source, baton::StrCat("'", key, "' is missing"));
    return absl::OkStatus();
  }
  if (!j[key].is_number()) {
    return Bad(source, baton::StrCat("'", key, "' must be a number, not ", j[key].dump()));
  }
  *out = j[key].get<double>();
  return absl::OkStatus();
}

absl::Status ReadBool(const json& j, const char* key, bool* out, std::string_view source) {
  if (!Present(j, key)) return absl::OkStatus();
  if (!j[key].is_boolean()) {
    return Bad(source, baton::StrCat("'", key, "' must be true or false, not ", j[key].dump()));
  }
  *out = j[key].get<bool>();
  return absl::OkStatus();
}

// eos_token_id is an int or a list of ints (Llama 3.1 lists three); null means none.
absl::Status ReadIdList(const json& j, const char* key, std::vector<int32_t>* out,
                        std::string_view source) {
  if (!Present(j, key)) return absl::OkStatus();
  const json& v = j[key];
  auto one = [&](const json& e) -> absl::Status {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 ||
        e.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return Bad(source, baton::StrCat("'", key,
                                       "' must hold token ids (non-negative integers), "
                                       "not ",
                                       e.dump()));
    }
    out->push_back(static_cast<int32_t>(e.get<int64_t>()));
    return absl::OkStatus();
  };
  if (v.is_array()) {
    if (v.size() > 1024) return Bad(source, baton::StrCat("'", key, "' lists too many ids"));
    for (const json& e : v) BATON_RETURN_IF_ERROR(one(e));
    return absl::OkStatus();
  }
  return one(v);
}

absl::Status ReadRopeScaling(const json& j, RopeScaling* r, std::string_view source) {
  if (!Present(j, "rope_scaling")) return absl::OkStatus();
  const json& s = j["rope_scaling"];
  if (!s.is_object()) return Bad(source, "'rope_scaling' must be null or an object");
  // Newer transformers write "rope_type"; older files "type".
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    if (Present(s, key)) {
      if (!s[key].is_string())
        return Bad(source, baton::StrCat("rope_scaling.", key, " is not a string"));
      type = s[key].get<std::string>();
      break;
    }
  }
  if (type.empty()) return Bad(source, "rope_scaling has no 'rope_type' (or 'type')");
  const std::string where = baton::StrCat(source, ": rope_scaling (", type, ")");
  if (type == "default") return absl::OkStatus();
  if (type == "linear") {
    r->type = RopeScaling::Type::kLinear;
    return ReadDouble(s, "factor", true, &r->factor, where);
  }
  if (type == "llama3") {
    // transformers requires all four keys for llama3; so do we, rather than guess.
    r->type = RopeScaling::Type::kLlama3;
    BATON_RETURN_IF_ERROR(ReadDouble(s, "factor", true, &r->factor, where));
    BATON_RETURN_IF_ERROR(ReadDouble(s, "low_freq_factor", true, &r->low_freq_factor, where));
    BATON_RETURN_IF_ERROR(ReadDouble(s, "high_freq_factor", true, &r->high_freq_factor, where));
    return ReadInt(s, "original_max_position_embeddings", true, &r->original_max_position, where);
  }
  return absl::InvalidArgumentError(
      baton::StrCat(source, ": rope_scaling type '", type,
                    "' is not supported (supported: llama3, linear, default); "
                    "remove rope_scaling to run without it at the original context"));
}

absl::StatusOr<ModelConfig> Build(const json& j, std::string_view source) {
  if (!j.is_object()) return Bad(source, "not a JSON object (expected a config.json)");
  ModelConfig c;
  if (Present(j, "architectures")) {
    const json& a = j["architectures"];
    if (!a.is_array() || a.empty() || !a[0].is_string()) {
      return Bad(source, "'architectures' must be a non-empty list of names");
    }
    c.architecture = a[0].get<std::string>();
  } else if (Present(j, "model_type") && j["model_type"].is_string()) {
    const std::string type = j["model_type"].get<std::string>();
    c.architecture = type == "llama"     ? "LlamaForCausalLM"
                     : type == "mistral" ? "MistralForCausalLM"
                     : type == "qwen2"   ? "Qwen2ForCausalLM"
                                         : type;
  } else {
    return Bad(source, "neither 'architectures' nor 'model_type' says what model this is");
  }
  const bool llama = c.architecture == "LlamaForCausalLM";
  const bool mistral = c.architecture == "MistralForCausalLM";
  const bool qwen2 = c.architecture == "Qwen2ForCausalLM";
  if (!llama && !mistral && !qwen2) {
    return absl::InvalidArgumentError(baton::StrCat(source, ": unsupported architecture ",
                                                    c.architecture,
                                                    "; supported: ", kSupportedHfArchitectures));
  }

  // Defaults for optional keys are those of the transformers config class.
  c.rms_norm_eps = 1e-6;
  c.max_position_embeddings = llama ? 2048 : mistral ? 131072 : 32768;
  BATON_RETURN_IF_ERROR(ReadInt(j, "vocab_size", true, &c.vocab_size, source));
  BATON_RETURN_IF_ERROR(ReadInt(j, "hidden_size", true, &c.hidden_size, source));
  BATON_RETURN_IF_ERROR(ReadInt(j, "intermediate_size", true, &c.intermediate_size, source));
  BATON_RETURN_IF_ERROR(ReadInt(j, "num_hidden_layers", true, &c.num_layers, source));
  BATON_RETURN_IF_ERROR(ReadInt(j, "num_attention_heads", true, &c.num_heads, source));
  c.num_kv_heads = c.num_heads;
  BATON_RETURN_IF_ERROR(ReadInt(j, "num_key_value_heads", false, &c.num_kv_heads, source));
  BATON_RETURN_IF_ERROR(ReadInt(j, "head_dim", false, &c.head_dim, source));
  if (c.head_dim == 0) {
    if (c.num_heads <= 0 || c.hidden_size % c.num_heads != 0) {
      return Bad(source, baton::StrCat("hidden_size (", c.hidden_size,
                                       ") is not a multiple of num_attention_heads (", c.num_heads,
                                       ") and there is no head_dim"));
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  BATON_RETURN_IF_ERROR(ReadDouble(j, "rms_norm_eps", false, &c.rms_norm_eps, source));
  BATON_RETURN_IF_ERROR(ReadDouble(j, "rope_theta", false, &c.rope_theta, source));
  BATON_RETURN_IF_ERROR(ReadRopeScaling(j, &c.rope_scaling, source));
  BATON_RETURN_IF_ERROR(
      ReadInt(j, "max_position_embeddings", false, &c.max_position_embeddings, source));
  BATON_RETURN_IF_ERROR(ReadBool(j, "tie_word_embeddings", &c.tie_word_embeddings, source));
  if (qwen2) {
    c.attention_bias = true;  // Qwen2 always has q/k/v biases; its config has no key for it
  } else if (llama) {
    BATON_RETURN_IF_ERROR(ReadBool(j, "attention_bias", &c.attention_bias, source));
  }
  bool mlp_bias = false;
  BATON_RETURN_IF_ERROR(ReadBool(j, "mlp_bias", &mlp_bias, source));
  if (mlp_bias) return Bad(source, "mlp_bias = true is not supported");
  if (Present(j, "hidden_act") && j["hidden_act"] != "silu") {
    return Bad(source, baton::StrCat("hidden_act ", j["hidden_act"].dump(),
                                     " is not supported (supported: \"silu\")"));
  }

  // Sliding-window attention (Mistral v0.1; Qwen2 when use_sliding_window is true) sees
  // only the last `sliding_window` positions. Baton's attention is full, which equals the
  // windowed one as long as the sequence fits in the window, so the context is clamped to
  // it: exact results instead of silently different ones past the window.
  bool use_window = mistral;
  if (qwen2) BATON_RETURN_IF_ERROR(ReadBool(j, "use_sliding_window", &use_window, source));
  if (use_window && Present(j, "sliding_window")) {
    int64_t window = 0;
    BATON_RETURN_IF_ERROR(ReadInt(j, "sliding_window", false, &window, source));
    if (window <= 0) return Bad(source, baton::StrCat("sliding_window = ", window, " must be > 0"));
    if (window < c.max_position_embeddings) c.max_position_embeddings = window;
  }

  if (Present(j, "bos_token_id")) {
    std::vector<int32_t> bos;
    BATON_RETURN_IF_ERROR(ReadIdList(j, "bos_token_id", &bos, source));
    if (!bos.empty()) c.bos_token_id = bos[0];
  }
  BATON_RETURN_IF_ERROR(ReadIdList(j, "eos_token_id", &c.eos_token_ids, source));
  c.rope_layout = RopeLayout::kHalf;
  BATON_RETURN_IF_ERROR(ValidateModelConfig(c, std::string(source)));
  return c;
}

absl::Status CheckRange(std::string_view source, const char* key, double v, double lo, double hi,
                        bool lo_open) {
  if (std::isfinite(v) && (lo_open ? v > lo : v >= lo) && v <= hi) return absl::OkStatus();
  return Bad(source, baton::StrCat("'", key, "' = ", v, " is outside ", lo_open ? "(" : "[", lo,
                                   ", ", hi, "]"));
}

}  // namespace

absl::StatusOr<ModelConfig> ParseHfConfig(std::string_view json_text, std::string_view source) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Bad(source, "not valid JSON (expected a config.json)");
  try {
    return Build(j, source);
  } catch (const json::exception& e) {
    return Bad(source, baton::StrCat("malformed field: ", e.what()));
  }
}

absl::StatusOr<GenerationDefaults> ParseGenerationConfig(std::string_view json_text,
                                                         std::string_view source) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Bad(source, "not a JSON object (expected a generation_config.json)");
  }
  GenerationDefaults g;
  try {
    BATON_RETURN_IF_ERROR(ReadIdList(j, "eos_token_id", &g.eos_token_ids, source));
    BATON_RETURN_IF_ERROR(ReadDouble(j, "temperature", false, &g.temperature, source));
    BATON_RETURN_IF_ERROR(CheckRange(source, "temperature", g.temperature, 0, 100, false));
    BATON_RETURN_IF_ERROR(ReadDouble(j, "top_p", false, &g.top_p, source));
    BATON_RETURN_IF_ERROR(CheckRange(source, "top_p", g.top_p, 0, 1, true));
    BATON_RETURN_IF_ERROR(ReadInt(j, "top_k", false, &g.top_k, source));
    if (g.top_k < 0) return Bad(source, baton::StrCat("'top_k' = ", g.top_k, " is negative"));
    BATON_RETURN_IF_ERROR(
        ReadDouble(j, "repetition_penalty", false, &g.repetition_penalty, source));
    BATON_RETURN_IF_ERROR(
        CheckRange(source, "repetition_penalty", g.repetition_penalty, 0, 100, true));
    BATON_RETURN_IF_ERROR(ReadBool(j, "do_sample", &g.do_sample, source));
  } catch (const json::exception& e) {
    return Bad(source, baton::StrCat("malformed field: ", e.what()));
  }
  return g;
}

}  // namespace baton::model
