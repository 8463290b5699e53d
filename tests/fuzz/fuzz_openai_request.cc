// Feeds arbitrary bytes to both OpenAI request parsers. Oracles: no crash, sanitizer report
// or exception; every error is InvalidArgument that maps to a 400 envelope which is valid
// JSON; every accepted request satisfies the limits it was checked against; and the
// response formatters, given the request's strings and raw input bytes as token text,
// always produce valid JSON (invalid UTF-8 included).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/check.h"
#include "common/utf8.h"
#include "frontdoor/openai/openai_protocol.h"
#include "nlohmann/json.hpp"

namespace {

using baton::frontdoor::ChoiceOut;
using baton::frontdoor::OpenAiRequest;
using baton::frontdoor::ProtocolLimits;

bool IsJson(const std::string& text) {
  return !nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false).is_discarded();
}

void CheckAccepted(const OpenAiRequest& r, const ProtocolLimits& limits, std::string_view raw) {
  BATON_CHECK(r.n >= 1 && r.n <= limits.max_n);
  BATON_CHECK(r.stop.size() <= static_cast<size_t>(limits.max_stop));
  for (const std::string& s : r.stop) {
    BATON_CHECK(!s.empty() && s.size() <= limits.max_stop_bytes && baton::IsValidUtf8(s));
  }
  BATON_CHECK(r.stop_token_ids.size() <= static_cast<size_t>(limits.max_stop_token_ids));
  for (int32_t id : r.stop_token_ids) BATON_CHECK(id >= 0);
  BATON_CHECK(!r.logprobs || (*r.logprobs >= 0 && *r.logprobs <= limits.max_top_logprobs));
  BATON_CHECK(!r.max_tokens || *r.max_tokens >= 1);
  BATON_CHECK(r.logit_bias.size() <= static_cast<size_t>(limits.max_logit_bias));
  for (size_t i = 0; i < r.logit_bias.size(); ++i) {
    BATON_CHECK(r.logit_bias[i].first >= 0);
    BATON_CHECK(r.logit_bias[i].second >= -100 && r.logit_bias[i].second <= 100);
    BATON_CHECK(i == 0 || r.logit_bias[i - 1].first < r.logit_bias[i].first);
  }
  BATON_CHECK(r.request_id.size() <= limits.max_id_bytes);
  BATON_CHECK(!r.echo);
  BATON_CHECK(!r.include_usage || r.stream);
  BATON_CHECK(!(r.add_generation_prompt && r.continue_final_message));
  if (r.kind == OpenAiRequest::Kind::kCompletion) {
    BATON_CHECK(r.prompt_text.has_value() != r.prompt_ids.has_value());
    if (r.prompt_ids) {
      BATON_CHECK(!r.prompt_ids->empty() && r.prompt_ids->size() <= limits.max_prompt_token_ids);
      for (int32_t id : *r.prompt_ids) BATON_CHECK(id >= 0);
    }
  } else {
    const auto& messages = r.chat.at("messages");
    BATON_CHECK(messages.is_array() && !messages.empty());
    BATON_CHECK(messages.size() <= static_cast<size_t>(limits.max_messages));
    for (const auto& m : messages) {
      BATON_CHECK(m.at("role").is_string() && m.at("content").is_string());
    }
    // What the chat template gets must survive a dump and a re-parse unchanged.
    const std::string dumped = baton::frontdoor::DumpJson(r.chat);
    auto again = baton::frontdoor::ParseJsonText(dumped, limits.max_json_depth + 8, "chat");
    BATON_CHECK(again.ok() && baton::frontdoor::DumpJson(*again) == dumped);
  }

  // Format responses from the request's strings and the raw input as token text.
  ChoiceOut c;
  c.text = r.prompt_text.value_or(r.stop.empty() ? std::string() : r.stop.front());
  c.has_logprobs = r.logprobs.has_value();
  const std::string_view piece = raw.substr(0, 16);
  c.logprobs.push_back({1, std::string(piece), -0.5f, {{1, std::string(piece), -0.5f}}});
  c.finish_reason = "stop";
  c.stop_reason = r.stop.empty() ? std::string(raw.substr(0, 4)) : r.stop.back();
  const baton::frontdoor::UsageOut usage{1, 2, 0};
  BATON_CHECK(
      IsJson(baton::frontdoor::CompletionResponseJson(r.request_id, 0, r.model, {c}, usage)));
  BATON_CHECK(IsJson(baton::frontdoor::ChatResponseJson(r.request_id, 0, r.model, {c}, usage)));
  BATON_CHECK(IsJson(baton::frontdoor::ChatChunkJson(r.request_id, 0, r.model, c, true)));
  BATON_CHECK(IsJson(baton::frontdoor::CompletionChunkJson(r.request_id, 0, r.model, c)));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  static const ProtocolLimits kDefault;
  static const ProtocolLimits kSmall = [] {
    ProtocolLimits l;
    l.max_n = 2;
    l.max_stop = 2;
    l.max_stop_bytes = 4;
    l.max_top_logprobs = 2;
    l.max_logit_bias = 2;
    l.max_messages = 3;
    l.max_prompt_token_ids = 4;
    l.max_stop_token_ids = 2;
    l.max_json_depth = 8;
    l.max_id_bytes = 8;
    return l;
  }();
  // Tight limits on odd sizes reach the bound checks; the fuzzer pads freely with spaces.
  const ProtocolLimits* limits = (size & 1) != 0 ? &kSmall : &kDefault;
  for (bool chat : {false, true}) {
    auto r = chat ? baton::frontdoor::ParseChatRequest(body, *limits)
                  : baton::frontdoor::ParseCompletionRequest(body, *limits);
    if (r.ok()) {
      BATON_CHECK(r->kind ==
                  (chat ? OpenAiRequest::Kind::kChat : OpenAiRequest::Kind::kCompletion));
      CheckAccepted(*r, *limits, body);
      continue;
    }
    BATON_CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    const baton::frontdoor::ApiError e = baton::frontdoor::ToApiError(r.status());
    BATON_CHECK(e.http_status == 400 && !e.message.empty());
    BATON_CHECK(IsJson(baton::frontdoor::ErrorJson(e)));
  }
  return 0;
}
