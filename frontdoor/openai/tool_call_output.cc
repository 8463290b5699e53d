#include "frontdoor/openai/tool_call_output.h"

#include <utility>

#include "frontdoor/openai/openai_json.h"
#include "frontdoor/openai/request_builder.h"
#include "nlohmann/json.hpp"

namespace baton::frontdoor {

std::unique_ptr<ToolCallOutput> ToolCallOutput::ForRequest(const OpenAiRequest& r,
                                                           std::optional<toolcall::Format> format) {
  if (r.kind != OpenAiRequest::Kind::kChat) return nullptr;
  switch (r.tool_choice) {
    case OpenAiRequest::ToolChoice::kNone:
      return nullptr;
    case OpenAiRequest::ToolChoice::kAuto:
      if (!format) return nullptr;
      return std::unique_ptr<ToolCallOutput>(new ToolCallOutput(
          Mode::kParse, "", r.parallel_tool_calls, toolcall::ToolCallParser::Create(*format)));
    case OpenAiRequest::ToolChoice::kNamed:
      return std::unique_ptr<ToolCallOutput>(
          new ToolCallOutput(Mode::kNamed, r.tool_choice_name, false, nullptr));
    case OpenAiRequest::ToolChoice::kRequired:
      return std::unique_ptr<ToolCallOutput>(
          new ToolCallOutput(Mode::kRequired, "", r.parallel_tool_calls, nullptr));
  }
  return nullptr;
}

ToolCallOutput::ToolCallOutput(Mode mode, std::string name, bool parallel,
                               std::unique_ptr<toolcall::ToolCallParser> parser)
    : mode_(mode), name_(std::move(name)), parallel_(parallel), parser_(std::move(parser)) {}

void ToolCallOutput::Emit(const toolcall::StreamDelta& delta, ChoiceOut* out) {
  out->text += delta.content;
  for (const toolcall::ToolCallDelta& d : delta.calls) {
    const bool first = !d.name.empty();
    if (first) {
      dropping_ = !parallel_ && calls_ >= 1;
      if (!dropping_) ++calls_;
    }
    // Without parallel_tool_calls a second call is dropped (vLLM passes it on; OpenAI
    // never makes one).
    if (dropping_) continue;
    ToolCallOut call;
    call.index = calls_ - 1;
    if (first) {
      call.id = NewRequestId("chatcmpl-tool");
      call.name = d.name;
    }
    call.arguments = d.arguments;
    out->tool_calls.push_back(std::move(call));
  }
}

void ToolCallOutput::Feed(std::string_view text, ChoiceOut* out) {
  if (text.empty()) return;
  switch (mode_) {
    case Mode::kParse:
      Emit(parser_->Feed(text), out);
      return;
    case Mode::kNamed: {
      // The text is the arguments, constrained to the function's parameters: it streams
      // as argument fragments behind one call.
      toolcall::StreamDelta delta;
      toolcall::ToolCallDelta d;
      if (calls_ == 0) d.name = name_;
      d.arguments = std::string(text);
      delta.calls.push_back(std::move(d));
      Emit(delta, out);
      return;
    }
    case Mode::kRequired:
      // A JSON array of calls, sent as calls once it is whole.
      held_.append(text);
      return;
  }
}

void ToolCallOutput::Finish(ChoiceOut* out) {
  switch (mode_) {
    case Mode::kParse:
      Emit(parser_->Finish(), out);
      break;
    case Mode::kNamed:
      if (calls_ == 0) {
        // Nothing generated (max_tokens cut it at once): still the call that was forced.
        toolcall::StreamDelta delta;
        delta.calls.push_back(toolcall::ToolCallDelta{0, name_, ""});
        Emit(delta, out);
      }
      break;
    case Mode::kRequired: {
      const nlohmann::json parsed = nlohmann::json::parse(held_, nullptr, false);
      bool valid = parsed.is_array();
      for (const auto& item : parsed.is_array() ? parsed : nlohmann::json::array()) {
        valid = valid && item.is_object() && item.contains("name") && item["name"].is_string();
      }
      if (!valid) {
        // Cut short by max_tokens: the client gets the text, not broken calls.
        out->text += held_;
        break;
      }
      toolcall::StreamDelta delta;
      for (const auto& item : parsed) {
        const auto params = item.find("parameters");
        delta.calls.push_back(
            toolcall::ToolCallDelta{0, item["name"].get<std::string>(),
                                    params == item.end() ? std::string("{}") : params->dump()});
      }
      Emit(delta, out);
      break;
    }
  }
  held_.clear();
  if (calls_ > 0 && out->finish_reason == "stop") out->finish_reason = "tool_calls";
}

void ToolCallOutput::MergeInto(const std::vector<ToolCallOut>& deltas,
                               std::vector<ToolCallOut>* calls) {
  for (const ToolCallOut& d : deltas) {
    if (static_cast<size_t>(d.index) >= calls->size()) calls->resize(d.index + 1);
    ToolCallOut& call = (*calls)[d.index];
    call.index = d.index;
    if (!d.id.empty()) call.id = d.id;
    if (!d.name.empty()) call.name = d.name;
    call.arguments += d.arguments;
  }
}

}  // namespace baton::frontdoor
