#include "frontdoor/openai/openai_response.h"

#include <charconv>
#include <cmath>
#include <string>
#include <utility>

#include "common/utf8.h"
#include "frontdoor/openai/openai_json.h"
#include "frontdoor/openai/proto_json.h"

namespace baton::frontdoor {
namespace {

using Json = nlohmann::ordered_json;

// JSON has no -inf (a token the sampler masked out); vLLM writes -9999.0 for it, and so
// do we. Floats go through their shortest decimal form so that -0.25f prints as -0.25 and
// not as the double -0.25000000372529030.
double LogprobValue(float logprob) {
  if (!std::isfinite(logprob) || logprob < -9999.0f) return -9999.0;
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof(buf), logprob).ptr;
  double value = logprob;
  std::from_chars(buf, end, value);
  return value;
}

int64_t CodePoints(std::string_view utf8) {
  int64_t n = 0;
  for (char c : utf8) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

Json Bytes(std::string_view raw) {
  Json bytes = Json::array();
  for (char c : raw) bytes.push_back(static_cast<unsigned char>(c));
  return bytes;
}

Json NullOr(const std::optional<std::string>& s) { return s ? Json(*s) : Json(); }

Json StopReason(const ChoiceOut& c) {
  if (c.stop_reason) return *c.stop_reason;
  if (c.stop_token_id) return *c.stop_token_id;
  return nullptr;
}

Json UsageJson(const UsageOut& u) {
  Json usage = Json::object();
  usage["prompt_tokens"] = u.prompt_tokens;
  usage["completion_tokens"] = u.completion_tokens;
  usage["total_tokens"] = u.prompt_tokens + u.completion_tokens;
  usage["prompt_tokens_details"] = Json{{"cached_tokens", u.cached_tokens}};
  return usage;
}

// Sets "usage", and "timings" when there are any.
void PutUsage(const UsageOut& u, Json* out) {
  (*out)["usage"] = UsageJson(u);
  if (u.trace != nullptr) (*out)["trace"] = ProtoToJson(*u.trace);
  if (!u.timings) return;
  const RequestTimings& t = *u.timings;
  (*out)["timings"] = Json{
      {"tokenize_seconds", t.tokenize_seconds},
      {"route_seconds", t.route_seconds},
      {"prefill_seconds", t.prefill_seconds},
      {"prefill_queue_seconds", t.prefill_queue_seconds},
      {"prefill_compute_seconds", t.prefill_compute_seconds},
      {"kv_transfer_seconds", t.kv_transfer_seconds},
      {"queue_seconds", t.queue_seconds},
      {"time_to_first_token_seconds", t.time_to_first_token_seconds},
      {"total_seconds", t.total_seconds},
  };
}

// Completions: parallel arrays, top_logprobs as {token text: logprob} (a later alternative
// that decodes to the same text as an earlier, likelier one is dropped, as a dict would).
Json CompletionLogprobs(const ChoiceOut& c) {
  if (!c.has_logprobs) return nullptr;
  Json tokens = Json::array(), token_logprobs = Json::array(), top = Json::array(),
       offsets = Json::array();
  int64_t offset = c.text_offset;
  for (const LogprobOut& lp : c.logprobs) {
    std::string token = SanitizeUtf8(lp.token);
    token_logprobs.push_back(LogprobValue(lp.logprob));
    Json alternatives = Json::object();
    for (const TopLogprobOut& alt : lp.top) {
      std::string text = SanitizeUtf8(alt.token);
      if (!alternatives.contains(text)) alternatives[text] = LogprobValue(alt.logprob);
    }
    top.push_back(std::move(alternatives));
    offsets.push_back(offset);
    offset += CodePoints(token);
    tokens.push_back(std::move(token));
  }
  Json out = Json::object();
  out["tokens"] = std::move(tokens);
  out["token_logprobs"] = std::move(token_logprobs);
  out["top_logprobs"] = std::move(top);
  out["text_offset"] = std::move(offsets);
  return out;
}

Json ChatLogprob(const std::string& raw, float logprob) {
  Json out = Json::object();
  out["token"] = SanitizeUtf8(raw);
  out["logprob"] = LogprobValue(logprob);
  out["bytes"] = Bytes(raw);
  return out;
}

Json ChatLogprobs(const ChoiceOut& c) {
  if (!c.has_logprobs) return nullptr;
  Json content = Json::array();
  for (const LogprobOut& lp : c.logprobs) {
    Json entry = ChatLogprob(lp.token, lp.logprob);
    Json top = Json::array();
    for (const TopLogprobOut& alt : lp.top) top.push_back(ChatLogprob(alt.token, alt.logprob));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return Json{{"content", std::move(content)}};
}

Json CompletionChoice(const ChoiceOut& c) {
  Json out = Json::object();
  out["index"] = c.index;
  out["text"] = c.text;
  out["logprobs"] = CompletionLogprobs(c);
  out["finish_reason"] = NullOr(c.finish_reason);
  out["stop_reason"] = StopReason(c);
  return out;
}

Json Envelope(std::string_view id, std::string_view object, int64_t created, std::string_view model,
              Json choices) {
  Json out = Json::object();
  out["id"] = std::string(id);
  out["object"] = std::string(object);
  out["created"] = created;
  out["model"] = std::string(model);
  out["choices"] = std::move(choices);
  return out;
}

// message.tool_calls, or (`delta`) a chunk's delta.tool_calls, where id, type and name
// appear only in a call's first delta.
Json ToolCallsJson(const std::vector<ToolCallOut>& calls, bool delta) {
  Json list = Json::array();
  for (const ToolCallOut& call : calls) {
    Json function = Json::object();
    if (!delta || !call.name.empty()) function["name"] = call.name;
    function["arguments"] = call.arguments;
    Json out = Json::object();
    if (delta) out["index"] = call.index;
    if (!delta || !call.id.empty()) {
      out["id"] = call.id;
      out["type"] = "function";
    }
    out["function"] = std::move(function);
    list.push_back(std::move(out));
  }
  return list;
}

constexpr std::string_view kCompletionObject = "text_completion";
constexpr std::string_view kChatObject = "chat.completion";
constexpr std::string_view kChatChunkObject = "chat.completion.chunk";

}  // namespace

std::string CompletionChunkJson(std::string_view id, int64_t created, std::string_view model,
                                const ChoiceOut& choice) {
  return DumpJson(
      Envelope(id, kCompletionObject, created, model, Json::array({CompletionChoice(choice)})));
}

std::string ChatChunkJson(std::string_view id, int64_t created, std::string_view model,
                          const ChoiceOut& choice, bool with_role) {
  // OpenAI's first chunk is {"role": "assistant", "content": ""} and its last, carrying only
  // finish_reason, has an empty delta; content appears only where there is some.
  Json delta = Json::object();
  if (with_role) delta["role"] = "assistant";
  if (with_role || !choice.text.empty()) delta["content"] = choice.text;
  if (!choice.tool_calls.empty()) delta["tool_calls"] = ToolCallsJson(choice.tool_calls, true);
  Json out = Json::object();
  out["index"] = choice.index;
  out["delta"] = std::move(delta);
  out["logprobs"] = ChatLogprobs(choice);
  out["finish_reason"] = NullOr(choice.finish_reason);
  out["stop_reason"] = StopReason(choice);
  return DumpJson(Envelope(id, kChatChunkObject, created, model, Json::array({std::move(out)})));
}

std::string UsageChunkJson(OpenAiRequest::Kind kind, std::string_view id, int64_t created,
                           std::string_view model, const UsageOut& usage) {
  const std::string_view object =
      kind == OpenAiRequest::Kind::kChat ? kChatChunkObject : kCompletionObject;
  Json out = Envelope(id, object, created, model, Json::array());
  PutUsage(usage, &out);
  return DumpJson(out);
}

std::string CompletionResponseJson(std::string_view id, int64_t created, std::string_view model,
                                   const std::vector<ChoiceOut>& choices, const UsageOut& usage) {
  Json list = Json::array();
  for (const ChoiceOut& c : choices) list.push_back(CompletionChoice(c));
  Json out = Envelope(id, kCompletionObject, created, model, std::move(list));
  PutUsage(usage, &out);
  return DumpJson(out);
}

std::string ChatResponseJson(std::string_view id, int64_t created, std::string_view model,
                             const std::vector<ChoiceOut>& choices, const UsageOut& usage) {
  Json list = Json::array();
  for (const ChoiceOut& c : choices) {
    Json message = Json::object();
    message["role"] = "assistant";
    if (c.tool_calls.empty()) {
      message["content"] = c.text;
    } else {
      message["content"] = c.text.empty() ? Json(nullptr) : Json(c.text);
      message["tool_calls"] = ToolCallsJson(c.tool_calls, false);
    }
    Json choice = Json::object();
    choice["index"] = c.index;
    choice["message"] = std::move(message);
    choice["logprobs"] = ChatLogprobs(c);
    choice["finish_reason"] = NullOr(c.finish_reason);
    choice["stop_reason"] = StopReason(c);
    list.push_back(std::move(choice));
  }
  Json out = Envelope(id, kChatObject, created, model, std::move(list));
  PutUsage(usage, &out);
  return DumpJson(out);
}

namespace {

Json ModelObject(const ModelEntry& m) {
  Json out = Json::object();
  out["id"] = m.id;
  out["object"] = "model";
  out["created"] = m.created;
  out["owned_by"] = m.owned_by;
  out["root"] = m.id;  // vLLM: the served name's underlying model; we serve no aliases
  out["parent"] = nullptr;
  out["max_model_len"] = m.max_model_len;
  return out;
}

}  // namespace

std::string ModelListJson(const std::vector<ModelEntry>& models) {
  Json data = Json::array();
  for (const ModelEntry& m : models) data.push_back(ModelObject(m));
  Json out = Json::object();
  out["object"] = "list";
  out["data"] = std::move(data);
  return DumpJson(out);
}

std::string ModelJson(const ModelEntry& model) { return DumpJson(ModelObject(model)); }

}  // namespace baton::frontdoor
