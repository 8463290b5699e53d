// How a chat choice's generated text becomes what the client sees when the request has
// tools (docs/tool_calls.md): content plus tool calls, whole or as streamed deltas.
//
//   auto out = ToolCallOutput::ForRequest(request, model.tool_call_format());  // null: plain
//   ChoiceOut c;
//   out->Feed(delta_text, &c);             // content and tool-call deltas to send now
//   if (finished) out->Finish(&c);         // what was held back; finish_reason "tool_calls"
//
// tool_choice "auto": the template family's parser (toolcall/) takes the markup out of
// the text. "required" / a named function: the output was constrained to the JSON of
// ToolCallsSchema (structured_request.h), turned into calls here. "none", or no parser for
// the model: the text is content.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "frontdoor/openai/openai_request.h"
#include "frontdoor/openai/openai_response.h"
#include "toolcall/tool_call_format.h"
#include "toolcall/tool_call_parser.h"

namespace baton::frontdoor {

class ToolCallOutput {
 public:
  // Null when the choice's text is plain content.
  static std::unique_ptr<ToolCallOutput> ForRequest(const OpenAiRequest& request,
                                                    std::optional<toolcall::Format> format);

  // One delta's text: appends the content to send now to out->text and the tool-call
  // deltas to out->tool_calls (a call's first delta has its id and name).
  void Feed(std::string_view text, ChoiceOut* out);
  // The end of the choice: flushes what was held back, and turns finish_reason "stop"
  // into "tool_calls" when the choice made calls.
  void Finish(ChoiceOut* out);

  // Folds streamed deltas into whole calls (a response's message.tool_calls).
  static void MergeInto(const std::vector<ToolCallOut>& deltas, std::vector<ToolCallOut>* calls);

 private:
  enum class Mode { kParse, kNamed, kRequired };
  ToolCallOutput(Mode mode, std::string name, bool parallel,
                 std::unique_ptr<toolcall::ToolCallParser> parser);

  void Emit(const toolcall::StreamDelta& delta, ChoiceOut* out);

  Mode mode_;
  std::string name_;  // kNamed: the function
  bool parallel_;     // parallel_tool_calls: false keeps the first call only
  std::unique_ptr<toolcall::ToolCallParser> parser_;  // kParse
  std::string held_;                                  // kRequired: the whole output
  int calls_ = 0;                                     // calls started
  bool dropping_ = false;  // the current call is one past the first, without parallel
};

}  // namespace baton::frontdoor
