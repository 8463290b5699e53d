#include "frontdoor/openai/openai_request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "common/status.h"
#include "common/strings.h"
#include "frontdoor/openai/openai_error.h"
#include "frontdoor/openai/openai_json.h"
#include "frontdoor/openai/structured_request.h"

namespace baton::frontdoor {
namespace {

using Json = nlohmann::ordered_json;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

// Up to `max` bytes of `s` for an error message, cut at a code point boundary.
std::string Preview(std::string_view s, size_t max = 40) {
  if (s.size() <= max) return std::string(s);
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return StrCat(s.substr(0, end), "...");
}

absl::Status TypeError(std::string_view path, std::string_view expected, const Json& got) {
  return ParamError(path, StrCat("'", path, "' must be ", expected, ", got ", JsonTypeName(got)));
}

absl::Status AboveMax(std::string_view path, std::string_view value, int64_t max) {
  return ParamError(path, StrCat("'", path, "' is ", value, "; the maximum is ", max));
}

absl::Status BelowMin(std::string_view path, std::string_view value, int64_t min) {
  return ParamError(path, StrCat("'", path, "' must be at least ", min, ", got ", value));
}

absl::Status TooMany(std::string_view path, size_t count, int64_t max) {
  return ParamError(path, StrCat("'", path, "' has ", count, " entries; the maximum is ", max));
}

absl::Status Unsupported(std::string_view path, std::string_view detail = "") {
  return ParamError(path, StrCat("'", path, "' is not supported by this server", detail));
}

// Integers, and numbers with an integral value (16.0, 1e3), which vLLM (pydantic) takes too.
absl::StatusOr<int64_t> ReadInt(const Json& v, std::string_view path, int64_t lo, int64_t hi) {
  int64_t value = 0;
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) return AboveMax(path, DumpJson(v), hi);
    value = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    value = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d)) return ParamError(path, StrCat("'", path, "' must be a finite integer"));
    if (d != std::floor(d)) {
      return ParamError(path, StrCat("'", path, "' must be an integer, got ", DumpJson(v)));
    }
    // 2^63 is exactly representable; anything at or beyond it does not fit.
    if (d >= 9223372036854775808.0) return AboveMax(path, DumpJson(v), hi);
    if (d < -9223372036854775808.0) return BelowMin(path, DumpJson(v), lo);
    value = static_cast<int64_t>(d);
  } else {
    return TypeError(path, "an integer", v);
  }
  if (value > hi) return AboveMax(path, DumpJson(v), hi);
  if (value < lo) return BelowMin(path, DumpJson(v), lo);
  return value;
}

absl::StatusOr<double> ReadNumber(const Json& v, std::string_view path) {
  if (!v.is_number()) return TypeError(path, "a number", v);
  const double d = v.get<double>();
  // JSON has no NaN or Infinity and the parser rejects 1e999; this guards the contract.
  if (!std::isfinite(d)) {
    return ParamError(path, StrCat("'", path, "' must be a finite number, got ", DumpJson(v)));
  }
  return d;
}

// The members of one JSON object, looked up by name; `prefix` makes paths for messages
// ("messages[3]" + "content"). A null member reads as absent, as pydantic's Optional does.
class Fields {
 public:
  Fields(const Json& object, std::string prefix) : prefix_(std::move(prefix)) {
    for (const auto& [key, value] : *object.get_ptr<const Json::object_t*>()) {
      members_.emplace(key, &value);
    }
  }

  std::string Path(std::string_view key) const {
    return prefix_.empty() ? std::string(key) : StrCat(prefix_, ".", key);
  }
  // Present and not null.
  const Json* Get(std::string_view key) const {
    auto it = members_.find(key);
    return it == members_.end() || it->second->is_null() ? nullptr : it->second;
  }
  // Present, possibly null.
  bool Has(std::string_view key) const { return members_.contains(key); }

  absl::Status Bool(std::string_view key, bool* out) const {
    const Json* v = Get(key);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_boolean()) return TypeError(Path(key), "a boolean", *v);
    *out = v->get<bool>();
    return absl::OkStatus();
  }
  absl::Status OptBool(std::string_view key, std::optional<bool>* out) const {
    if (Get(key) == nullptr) return absl::OkStatus();
    bool b = false;
    BATON_RETURN_IF_ERROR(Bool(key, &b));
    *out = b;
    return absl::OkStatus();
  }
  absl::Status Int(std::string_view key, int64_t lo, int64_t hi,
                   std::optional<int64_t>* out) const {
    const Json* v = Get(key);
    if (v == nullptr) return absl::OkStatus();
    BATON_ASSIGN_OR_RETURN(*out, ReadInt(*v, Path(key), lo, hi));
    return absl::OkStatus();
  }
  absl::Status Number(std::string_view key, std::optional<double>* out) const {
    const Json* v = Get(key);
    if (v == nullptr) return absl::OkStatus();
    BATON_ASSIGN_OR_RETURN(*out, ReadNumber(*v, Path(key)));
    return absl::OkStatus();
  }
  absl::Status String(std::string_view key, std::string* out,
                      size_t max_bytes = std::numeric_limits<size_t>::max()) const {
    const Json* v = Get(key);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_string()) return TypeError(Path(key), "a string", *v);
    const auto& s = v->get_ref<const std::string&>();
    if (s.size() > max_bytes) {
      return ParamError(Path(key), StrCat("'", Path(key), "' is ", s.size(),
                                          " bytes; the maximum is ", max_bytes));
    }
    *out = s;
    return absl::OkStatus();
  }

 private:
  std::string prefix_;
  std::unordered_map<std::string_view, const Json*> members_;
};

// A value that asks for nothing: null, false, 0, "", [] or {}.
bool IsNoOp(const Json& v) {
  if (v.is_null()) return true;
  if (v.is_boolean()) return !v.get<bool>();
  if (v.is_number()) return v.get<double>() == 0;
  if (v.is_string() || v.is_array() || v.is_object()) return v.empty();
  return false;
}

// vLLM parameters whose effect we do not implement. Ignoring them would silently change
// what the client gets, so each is rejected unless it asks for nothing.
absl::Status RejectUnsupported(const Fields& f, OpenAiRequest::Kind kind) {
  static constexpr std::string_view kCommon[] = {"echo",
                                                 "use_beam_search",
                                                 "suffix",
                                                 "prompt_logprobs",
                                                 "min_tokens",
                                                 "guided_json",
                                                 "guided_regex",
                                                 "guided_choice",
                                                 "guided_grammar",
                                                 "structured_outputs",
                                                 "allowed_token_ids",
                                                 "bad_words",
                                                 "logits_processors",
                                                 "prompt_embeds",
                                                 "truncate_prompt_tokens",
                                                 "return_tokens_as_token_ids"};
  for (std::string_view key : kCommon) {
    if (const Json* v = f.Get(key); v != nullptr && !IsNoOp(*v)) return Unsupported(key);
  }
  if (kind == OpenAiRequest::Kind::kChat) {
    if (const Json* v = f.Get("chat_template"); v != nullptr && !IsNoOp(*v)) {
      return Unsupported("chat_template", "; the model's own template is used");
    }
    if (const Json* v = f.Get("documents"); v != nullptr && !IsNoOp(*v)) {
      return Unsupported("documents");
    }
  }
  return absl::OkStatus();
}

absl::Status ParseStop(const Fields& f, const ProtocolLimits& limits, OpenAiRequest* r) {
  const Json* v = f.Get("stop");
  if (v == nullptr) return absl::OkStatus();
  auto add = [&](const Json& s, std::string path) -> absl::Status {
    if (!s.is_string()) return TypeError(path, "a string", s);
    const auto& text = s.get_ref<const std::string&>();
    // An empty stop string would match at once; vLLM rejects it too.
    if (text.empty()) return ParamError(path, StrCat("'", path, "' must not be empty"));
    if (text.size() > limits.max_stop_bytes) {
      return ParamError(path, StrCat("'", path, "' is ", text.size(), " bytes; the maximum is ",
                                     limits.max_stop_bytes));
    }
    r->stop.push_back(text);
    return absl::OkStatus();
  };
  if (v->is_string()) return add(*v, "stop");
  if (!v->is_array()) return TypeError("stop", "a string or an array of strings", *v);
  if (v->size() > static_cast<size_t>(limits.max_stop)) {
    return TooMany("stop", v->size(), limits.max_stop);
  }
  for (size_t i = 0; i < v->size(); ++i) {
    BATON_RETURN_IF_ERROR(add((*v)[i], StrCat("stop[", i, "]")));
  }
  return absl::OkStatus();
}

absl::Status ParseStopTokenIds(const Fields& f, const ProtocolLimits& limits, OpenAiRequest* r) {
  const Json* v = f.Get("stop_token_ids");
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_array()) return TypeError("stop_token_ids", "an array of token ids", *v);
  if (v->size() > static_cast<size_t>(limits.max_stop_token_ids)) {
    return TooMany("stop_token_ids", v->size(), limits.max_stop_token_ids);
  }
  for (size_t i = 0; i < v->size(); ++i) {
    BATON_ASSIGN_OR_RETURN(int64_t id,
                           ReadInt((*v)[i], StrCat("stop_token_ids[", i, "]"), 0, kInt32Max));
    r->stop_token_ids.push_back(static_cast<int32_t>(id));
  }
  return absl::OkStatus();
}

// {"50256": -100, ...}: keys are decimal token ids, values biases in [-100, 100].
// vLLM clamps out-of-range biases; we reject them as OpenAI does, since a client that sends
// 500 has a bug it should hear about.
absl::Status ParseLogitBias(const Fields& f, const ProtocolLimits& limits, OpenAiRequest* r) {
  const Json* v = f.Get("logit_bias");
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_object()) return TypeError("logit_bias", "an object of token id to bias", *v);
  if (v->size() > static_cast<size_t>(limits.max_logit_bias)) {
    return TooMany("logit_bias", v->size(), limits.max_logit_bias);
  }
  std::map<int32_t, float> biases;  // "5" and "05" name one token: the later one wins
  for (const auto& [key, value] : *v->get_ptr<const Json::object_t*>()) {
    int64_t id = 0;
    bool ok = !key.empty() && key.size() <= 10;
    for (char c : key) {
      ok = ok && c >= '0' && c <= '9';
      if (ok) id = id * 10 + (c - '0');
    }
    if (!ok || id > kInt32Max) {
      return ParamError("logit_bias", StrCat("'logit_bias' key '", Preview(key),
                                             "' is not a token id (a non-negative integer)"));
    }
    const std::string path = StrCat("logit_bias.", key);
    BATON_ASSIGN_OR_RETURN(double bias, ReadNumber(value, path));
    if (bias < -100 || bias > 100) {
      return ParamError(path, StrCat("'", path, "' is ", DumpJson(value),
                                     "; biases must be between -100 and 100"));
    }
    biases[static_cast<int32_t>(id)] = static_cast<float>(bias);
  }
  r->logit_bias.assign(biases.begin(), biases.end());
  return absl::OkStatus();
}

// Ids land in response ids, logs and headers, so they are short and printable.
absl::Status CheckId(std::string_view key, const std::string& value) {
  for (char c : value) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7F) {
      return ParamError(key, StrCat("'", key, "' must not contain control characters"));
    }
  }
  return absl::OkStatus();
}

// Parameters both endpoints share.
absl::Status ParseCommon(const Fields& f, const ProtocolLimits& limits, OpenAiRequest* r) {
  BATON_RETURN_IF_ERROR(RejectUnsupported(f, r->kind));
  BATON_RETURN_IF_ERROR(f.String("model", &r->model));
  BATON_RETURN_IF_ERROR(f.Bool("stream", &r->stream));
  if (const Json* options = f.Get("stream_options"); options != nullptr) {
    if (!options->is_object()) return TypeError("stream_options", "an object", *options);
    // As vLLM: options for a stream that is not there are a client mistake.
    if (!r->stream) {
      return ParamError("stream_options", "'stream_options' is only allowed when 'stream' is true");
    }
    BATON_RETURN_IF_ERROR(
        Fields(*options, "stream_options").Bool("include_usage", &r->include_usage));
  }
  std::optional<int64_t> n;
  BATON_RETURN_IF_ERROR(f.Int("n", 1, limits.max_n, &n));
  if (n) r->n = static_cast<int>(*n);
  BATON_RETURN_IF_ERROR(ParseStop(f, limits, r));
  BATON_RETURN_IF_ERROR(ParseStopTokenIds(f, limits, r));
  BATON_RETURN_IF_ERROR(f.Number("temperature", &r->temperature));
  BATON_RETURN_IF_ERROR(f.Number("top_p", &r->top_p));
  BATON_RETURN_IF_ERROR(f.Number("min_p", &r->min_p));
  BATON_RETURN_IF_ERROR(f.Number("repetition_penalty", &r->repetition_penalty));
  BATON_RETURN_IF_ERROR(f.Number("presence_penalty", &r->presence_penalty));
  BATON_RETURN_IF_ERROR(f.Number("frequency_penalty", &r->frequency_penalty));
  // -1 and 0 both mean off (vLLM); the worker checks the upper bound, the vocabulary size.
  BATON_RETURN_IF_ERROR(f.Int("top_k", -1, kInt64Max, &r->top_k));
  std::optional<int64_t> seed;
  BATON_RETURN_IF_ERROR(f.Int("seed", kInt64Min, kInt64Max, &seed));
  if (seed) r->seed = static_cast<uint64_t>(*seed);
  BATON_RETURN_IF_ERROR(ParseLogitBias(f, limits, r));
  BATON_RETURN_IF_ERROR(f.Bool("ignore_eos", &r->ignore_eos));
  BATON_RETURN_IF_ERROR(f.Bool("trace", &r->trace));
  BATON_RETURN_IF_ERROR(f.Bool("skip_special_tokens", &r->skip_special_tokens));
  BATON_RETURN_IF_ERROR(f.Bool("include_stop_str_in_output", &r->include_stop_str_in_output));
  BATON_RETURN_IF_ERROR(f.OptBool("add_special_tokens", &r->add_special_tokens));
  BATON_RETURN_IF_ERROR(f.String("request_id", &r->request_id, limits.max_id_bytes));
  BATON_RETURN_IF_ERROR(CheckId("request_id", r->request_id));
  std::optional<int64_t> priority;
  BATON_RETURN_IF_ERROR(f.Int("priority", kInt32Min, kInt32Max, &priority));
  if (priority) r->priority = static_cast<int>(*priority);
  if (f.Get("cache_salt") != nullptr) {
    BATON_RETURN_IF_ERROR(f.String("cache_salt", &r->cache_salt, limits.max_id_bytes));
    // vLLM: an empty salt is a mistake, not "no salt".
    if (r->cache_salt.empty()) {
      return ParamError("cache_salt", "'cache_salt' must be a non-empty string when given");
    }
  }
  BATON_RETURN_IF_ERROR(f.String("user", &r->user, limits.max_id_bytes));
  BATON_RETURN_IF_ERROR(f.String("prompt_cache_key", &r->prompt_cache_key, limits.max_id_bytes));
  return absl::OkStatus();
}

absl::StatusOr<Json> ParseBody(std::string_view body, const ProtocolLimits& limits) {
  BATON_ASSIGN_OR_RETURN(Json root, ParseJsonText(body, limits.max_json_depth, "request body"));
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        StrCat("request body must be a JSON object, got ", JsonTypeName(root)));
  }
  return root;
}

// ---- completions ----

absl::StatusOr<std::vector<int32_t>> ReadTokenIds(const Json& array, std::string_view path,
                                                  const ProtocolLimits& limits) {
  if (array.empty()) return ParamError(path, StrCat("'", path, "' must not be empty"));
  if (array.size() > limits.max_prompt_token_ids) {
    return ParamError(path, StrCat("'", path, "' has ", array.size(), " token ids; the maximum is ",
                                   limits.max_prompt_token_ids));
  }
  std::vector<int32_t> ids;
  ids.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    BATON_ASSIGN_OR_RETURN(int64_t id, ReadInt(array[i], StrCat(path, "[", i, "]"), 0, kInt32Max));
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// We serve one prompt per request: a batch would need n x prompts choices with OpenAI's
// index arithmetic, and the router schedules each prompt separately anyway.
absl::Status ParsePrompt(const Fields& f, const ProtocolLimits& limits, OpenAiRequest* r) {
  const Json* v = f.Get("prompt");
  if (v == nullptr) return ParamError("prompt", "'prompt' is required");
  if (v->is_string()) {
    r->prompt_text = v->get<std::string>();
    return absl::OkStatus();
  }
  if (!v->is_array()) return TypeError("prompt", "a string or an array of token ids", *v);
  if (v->empty()) return ParamError("prompt", "'prompt' must not be empty");
  const Json& first = v->front();
  if (first.is_string() || first.is_array()) {
    if (v->size() > 1) {
      return ParamError(
          "prompt", StrCat("'prompt' has ", v->size(), " prompts; send one request per prompt"));
    }
    if (first.is_string()) {
      r->prompt_text = first.get<std::string>();
      return absl::OkStatus();
    }
    BATON_ASSIGN_OR_RETURN(r->prompt_ids, ReadTokenIds(first, "prompt[0]", limits));
    return absl::OkStatus();
  }
  if (!first.is_number()) {
    return TypeError("prompt[0]", "a string, a token id or an array of token ids", first);
  }
  BATON_ASSIGN_OR_RETURN(r->prompt_ids, ReadTokenIds(*v, "prompt", limits));
  return absl::OkStatus();
}

// ---- chat ----

// Content as chat templates expect it: a string. vLLM joins text parts with "\n" (OpenAI
// does not say); null content (an assistant turn with only tool calls) becomes "", which
// templates that concatenate content handle where null would fail.
absl::StatusOr<std::string> ReadContent(const Fields& m, const std::string& role) {
  const std::string path = m.Path("content");
  const Json* v = m.Get("content");
  if (v == nullptr) {
    if (role == "assistant") return std::string();
    return ParamError(path, StrCat("'", path, "' is required for role '", Preview(role), "'"));
  }
  if (v->is_string()) return v->get<std::string>();
  if (!v->is_array()) return TypeError(path, "a string or an array of content parts", *v);
  std::string text;
  for (size_t j = 0; j < v->size(); ++j) {
    const Json& part = (*v)[j];
    const std::string part_path = StrCat(path, "[", j, "]");
    if (j > 0) text += '\n';
    if (part.is_string()) {  // vLLM takes bare strings as text parts
      text += part.get_ref<const std::string&>();
      continue;
    }
    if (!part.is_object()) return TypeError(part_path, "an object", part);
    const Fields p(part, part_path);
    std::string type;
    BATON_RETURN_IF_ERROR(p.String("type", &type));
    if (type != "text") {
      const std::string type_path = p.Path("type");
      if (p.Get("type") == nullptr)
        return ParamError(type_path, StrCat("'", type_path, "' is required"));
      return ParamError(type_path, StrCat("'", type_path, "' is '", Preview(type),
                                          "'; only 'text' content parts are supported"));
    }
    const Json* t = p.Get("text");
    if (t == nullptr)
      return ParamError(p.Path("text"), StrCat("'", p.Path("text"), "' is required"));
    if (!t->is_string()) return TypeError(p.Path("text"), "a string", *t);
    text += t->get_ref<const std::string&>();
  }
  return text;
}

// Templates want tool-call arguments as objects (transformers' convention; vLLM parses the
// JSON string too). Null or "" becomes {}.
absl::StatusOr<Json> ReadToolCall(const Json& call, const std::string& path, int max_depth) {
  if (!call.is_object()) return TypeError(path, "an object", call);
  Json out = call;
  const Fields c(call, path);
  const Json* function = c.Get("function");
  const std::string fpath = c.Path("function");
  if (function == nullptr) return ParamError(fpath, StrCat("'", fpath, "' is required"));
  if (!function->is_object()) return TypeError(fpath, "an object", *function);
  const Fields fn(*function, fpath);
  const Json* name = fn.Get("name");
  if (name == nullptr)
    return ParamError(fn.Path("name"), StrCat("'", fn.Path("name"), "' is required"));
  if (!name->is_string()) return TypeError(fn.Path("name"), "a string", *name);
  const std::string apath = fn.Path("arguments");
  const Json* args = fn.Get("arguments");
  Json parsed = Json::object();
  if (args != nullptr && args->is_string()) {
    const auto& text = args->get_ref<const std::string&>();
    if (!text.empty()) {
      auto value = ParseJsonText(text, max_depth, StrCat("'", apath, "'"));
      if (!value.ok()) return ParamError(apath, std::string(value.status().message()));
      parsed = *std::move(value);
    }
  } else if (args != nullptr && (args->is_object() || args->is_array())) {
    parsed = *args;
  } else if (args != nullptr) {
    return TypeError(apath, "a JSON string or an object", *args);
  }
  out["function"]["arguments"] = std::move(parsed);
  return out;
}

absl::StatusOr<Json> ReadMessage(const Json& message, size_t i, const ProtocolLimits& limits) {
  const std::string path = StrCat("messages[", i, "]");
  if (!message.is_object()) return TypeError(path, "an object", message);
  const Fields m(message, path);
  const Json* role = m.Get("role");
  if (role == nullptr)
    return ParamError(m.Path("role"), StrCat("'", m.Path("role"), "' is required"));
  if (!role->is_string()) return TypeError(m.Path("role"), "a string", *role);
  const auto& role_name = role->get_ref<const std::string&>();
  BATON_RETURN_IF_ERROR(CheckMessageRole(role_name, m.Path("role")));
  BATON_ASSIGN_OR_RETURN(std::string content, ReadContent(m, role_name));
  Json out = Json::object();
  out["role"] = role_name;
  out["content"] = std::move(content);
  std::string s;
  if (m.Get("name") != nullptr) {
    BATON_RETURN_IF_ERROR(m.String("name", &s));
    out["name"] = s;
  }
  if (role_name == "assistant") {
    if (const Json* calls = m.Get("tool_calls"); calls != nullptr) {
      if (!calls->is_array()) return TypeError(m.Path("tool_calls"), "an array", *calls);
      Json normalised = Json::array();
      // chat(1) > messages(2) > message(3) > tool_calls(4) > call(5) > function(6)
      const int args_depth = std::max(1, limits.max_json_depth - 6);
      for (size_t j = 0; j < calls->size(); ++j) {
        BATON_ASSIGN_OR_RETURN(
            Json call,
            ReadToolCall((*calls)[j], StrCat(m.Path("tool_calls"), "[", j, "]"), args_depth));
        normalised.push_back(std::move(call));
      }
      out["tool_calls"] = std::move(normalised);
    }
    for (std::string_view key : {"reasoning_content", "reasoning"}) {
      if (m.Get(key) == nullptr) continue;
      BATON_RETURN_IF_ERROR(m.String(key, &s));
      out[std::string(key)] = s;
    }
  }
  if (role_name == "tool" && m.Get("tool_call_id") != nullptr) {
    BATON_RETURN_IF_ERROR(m.String("tool_call_id", &s));
    out["tool_call_id"] = s;
  }
  return out;
}

absl::Status ParseMessages(const Fields& f, const ProtocolLimits& limits, OpenAiRequest* r) {
  const Json* v = f.Get("messages");
  if (v == nullptr) return ParamError("messages", "'messages' is required");
  if (!v->is_array()) return TypeError("messages", "an array", *v);
  if (v->empty()) return ParamError("messages", "'messages' must not be empty");
  if (v->size() > static_cast<size_t>(limits.max_messages)) {
    return TooMany("messages", v->size(), limits.max_messages);
  }
  Json messages = Json::array();
  for (size_t i = 0; i < v->size(); ++i) {
    BATON_ASSIGN_OR_RETURN(Json message, ReadMessage((*v)[i], i, limits));
    messages.push_back(std::move(message));
  }
  r->chat = Json::object();
  r->chat["messages"] = std::move(messages);
  return absl::OkStatus();
}

// Tools go to the template as the client wrote them (key order included), after checking
// the shape every template relies on.
absl::Status ParseTools(const Fields& f, OpenAiRequest* r) {
  const Json* v = f.Get("tools");
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_array()) return TypeError("tools", "an array", *v);
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& tool = (*v)[i];
    const std::string path = StrCat("tools[", i, "]");
    if (!tool.is_object()) return TypeError(path, "an object", tool);
    const Fields t(tool, path);
    std::string type;
    BATON_RETURN_IF_ERROR(t.String("type", &type));
    if (t.Get("type") != nullptr && type != "function") {
      return ParamError(t.Path("type"), StrCat("'", t.Path("type"), "' is '", Preview(type),
                                               "'; only 'function' tools are supported"));
    }
    const Json* function = t.Get("function");
    const std::string fpath = t.Path("function");
    if (function == nullptr) return ParamError(fpath, StrCat("'", fpath, "' is required"));
    if (!function->is_object()) return TypeError(fpath, "an object", *function);
    const Fields fn(*function, fpath);
    const Json* name = fn.Get("name");
    if (name == nullptr)
      return ParamError(fn.Path("name"), StrCat("'", fn.Path("name"), "' is required"));
    if (!name->is_string()) return TypeError(fn.Path("name"), "a string", *name);
  }
  r->chat["tools"] = *v;
  return absl::OkStatus();
}

// Template variables that the request's own fields (or the server) set.
absl::Status ParseTemplateKwargs(const Fields& f, OpenAiRequest* r) {
  const Json* v = f.Get("chat_template_kwargs");
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_object()) return TypeError("chat_template_kwargs", "an object", *v);
  static constexpr std::string_view kReserved[] = {
      "messages",  "tools",     "add_generation_prompt",
      "bos_token", "eos_token", "continue_final_message"};
  for (const auto& [key, value] : *v->get_ptr<const Json::object_t*>()) {
    for (std::string_view reserved : kReserved) {
      if (key == reserved) {
        const std::string path = StrCat("chat_template_kwargs.", key);
        return ParamError(path,
                          StrCat("'", path, "' is set by the server or by the request's own '", key,
                                 "' parameter"));
      }
    }
  }
  r->chat_template_kwargs = *v;
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckMessageRole(std::string_view role, const std::string& path) {
  // OpenAI's set. vLLM passes any role on to the template, where a role the template does
  // not know is silently dropped or rendered as text the model takes for a turn marker.
  static constexpr std::string_view kRoles[] = {"system",    "developer", "user",
                                                "assistant", "tool",      "function"};
  if (role.empty()) return ParamError(path, StrCat("'", path, "' must not be empty"));
  for (std::string_view known : kRoles) {
    if (role == known) return absl::OkStatus();
  }
  return ParamError(path, StrCat("Invalid value for '", path, "': '", Preview(role),
                                 "'. Supported values are: 'system', 'developer', 'user', "
                                 "'assistant', 'tool', and 'function'."));
}

absl::StatusOr<OpenAiRequest> ParseCompletionRequest(std::string_view body,
                                                     const ProtocolLimits& limits) {
  BATON_ASSIGN_OR_RETURN(const Json root, ParseBody(body, limits));
  const Fields f(root, "");
  OpenAiRequest r;
  r.kind = OpenAiRequest::Kind::kCompletion;
  BATON_RETURN_IF_ERROR(ParsePrompt(f, limits, &r));
  BATON_RETURN_IF_ERROR(ParseCommon(f, limits, &r));
  BATON_RETURN_IF_ERROR(ParseResponseFormat(root, &r));
  // OpenAI and vLLM default to 16 when absent; vLLM reads an explicit null as "up to the
  // context length", and so do we.
  if (!f.Has("max_tokens")) r.max_tokens = 16;
  BATON_RETURN_IF_ERROR(f.Int("max_tokens", 1, kInt64Max, &r.max_tokens));
  std::optional<int64_t> logprobs;
  BATON_RETURN_IF_ERROR(f.Int("logprobs", 0, limits.max_top_logprobs, &logprobs));
  if (logprobs) r.logprobs = static_cast<int>(*logprobs);
  // best_of == n changes nothing; more candidates than returned is not implemented.
  std::optional<int64_t> best_of;
  BATON_RETURN_IF_ERROR(f.Int("best_of", 1, kInt64Max, &best_of));
  if (best_of && *best_of != r.n) {
    return Unsupported("best_of", " unless it equals 'n'");
  }
  return r;
}

absl::StatusOr<OpenAiRequest> ParseChatRequest(std::string_view body,
                                               const ProtocolLimits& limits) {
  BATON_ASSIGN_OR_RETURN(const Json root, ParseBody(body, limits));
  const Fields f(root, "");
  OpenAiRequest r;
  r.kind = OpenAiRequest::Kind::kChat;
  BATON_RETURN_IF_ERROR(ParseMessages(f, limits, &r));
  BATON_RETURN_IF_ERROR(ParseTools(f, &r));
  BATON_RETURN_IF_ERROR(ParseCommon(f, limits, &r));
  BATON_RETURN_IF_ERROR(ParseResponseFormat(root, &r));
  BATON_RETURN_IF_ERROR(ParseToolChoice(root, &r));
  BATON_RETURN_IF_ERROR(ParseTemplateKwargs(f, &r));
  BATON_RETURN_IF_ERROR(f.Bool("add_generation_prompt", &r.add_generation_prompt));
  BATON_RETURN_IF_ERROR(f.Bool("continue_final_message", &r.continue_final_message));
  if (r.add_generation_prompt && r.continue_final_message) {
    // vLLM's rule: continuing the last message and opening a new one contradict each other.
    return ParamError("continue_final_message",
                      "'continue_final_message' and 'add_generation_prompt' cannot both be true");
  }
  // max_completion_tokens replaced the deprecated max_tokens; both are checked.
  std::optional<int64_t> max_tokens, max_completion_tokens;
  BATON_RETURN_IF_ERROR(f.Int("max_tokens", 1, kInt64Max, &max_tokens));
  BATON_RETURN_IF_ERROR(f.Int("max_completion_tokens", 1, kInt64Max, &max_completion_tokens));
  r.max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;
  if (max_completion_tokens) r.max_tokens_param = "max_completion_tokens";
  bool logprobs = false;
  BATON_RETURN_IF_ERROR(f.Bool("logprobs", &logprobs));
  std::optional<int64_t> top;
  BATON_RETURN_IF_ERROR(f.Int("top_logprobs", 0, limits.max_top_logprobs, &top));
  // As vLLM: top_logprobs 0 without logprobs asks for nothing and passes; more is a mistake.
  if (top && *top > 0 && !logprobs) {
    return ParamError("top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
  }
  if (logprobs) r.logprobs = static_cast<int>(top.value_or(0));
  return r;
}

}  // namespace baton::frontdoor
