// Chat templates: renders a model's Jinja `chat_template` (from tokenizer_config.json)
// into the prompt text, exactly as @huggingface/jinja (the reference the oracle tests run)
// renders it, including that library's whitespace rules and JavaScript-flavoured output
// (`{{ true }}` prints "true", tojson keeps key order and uses ", "/": " separators).
//
//   BATON_ASSIGN_OR_RETURN(ChatTemplate tmpl, ChatTemplate::FromTokenizerConfig(config));
//   ChatInputs inputs;
//   inputs.messages = request["messages"];
//   inputs.bos_token = "<s>";
//   BATON_ASSIGN_OR_RETURN(std::string prompt, tmpl.Render(inputs));
//
// Errors are absl::Status, never exceptions: a syntax error or an unsupported construct
// is InvalidArgument naming it and its line ("chat template: unsupported filter
// 'wordwrap' at line 3"); a template's own raise_exception(msg) is InvalidArgument whose
// message is msg (see IsTemplateException); exceeding a TemplateLimits bound is
// InvalidArgument naming the limit.
//
// Baton accepts some constructs the reference rejects, with Python Jinja's results: more
// filters (round, sum, min, max, batch, striptags, wordcount, escape, select, reject, ...),
// tests with arguments, string find/count/join/format, list.append, ordering and
// repetition of strings. Wherever the reference renders, Baton's output is identical.
//
// Key order: templates see objects in the order of their JSON object. nlohmann::json
// keeps keys sorted, so `tools | tojson` lists keys alphabetically; to keep a client's
// order (as transformers does), parse the request as nlohmann::ordered_json and render
// with RenderWithOrderedContext.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace baton::templating {

struct TemplateLimits {
  size_t max_output_bytes = 1 << 20;     // any string the template builds, output included
  size_t max_loop_iterations = 1 << 20;  // loop iterations + macro calls + items filters walk
  size_t max_recursion_depth = 64;       // nested macro calls
  size_t max_source_bytes = 1 << 20;
};

// A wall-clock reading for strftime_now(), in local time.
struct TemplateDate {
  int year = 1970, month = 1, day = 1, hour = 0, minute = 0;
};

struct ChatInputs {
  nlohmann::json messages = nlohmann::json::array();  // [{role, content, tool_calls?, ...}]
  nlohmann::json tools;                               // null when absent, else array
  bool add_generation_prompt = true;
  std::string bos_token, eos_token;
  nlohmann::json extra = nlohmann::json::object();  // other kwargs (e.g. enable_thinking), visible
                                                    // as template variables
  // What strftime_now() reads; unset means the current local time. Tests fix it so that
  // output does not depend on the day.
  std::optional<TemplateDate> now;
};

// The template variables Render() provides: messages, tools (null when absent),
// add_generation_prompt, bos_token, eos_token, then every key of `extra`. An `extra` key
// that repeats one of these is an error.
absl::StatusOr<nlohmann::json> MakeChatContext(const ChatInputs& inputs);

// True for the status a template's raise_exception(msg) produced (its message is msg).
bool IsTemplateException(const absl::Status& status);

struct CompiledTemplate;

class ChatTemplate {
 public:
  static absl::StatusOr<ChatTemplate> Parse(std::string_view source,
                                            const TemplateLimits& limits = {});

  // From tokenizer_config.json's "chat_template": a string, or a list of
  // {name, template}. A non-empty `name` picks that entry ("default" also names a plain
  // string). With an empty name, the "default" entry is used (or the only entry, when
  // there is exactly one); if a "tool_use" entry exists too, it is kept and Render()
  // switches to it whenever tools are given (not null), which is how transformers'
  // apply_chat_template chooses. A list with several entries and no "default" is an
  // error, as in transformers.
  static absl::StatusOr<ChatTemplate> FromTokenizerConfig(const nlohmann::json& config,
                                                          std::string_view name = "",
                                                          const TemplateLimits& limits = {});

  absl::StatusOr<std::string> Render(const ChatInputs& inputs) const;
  // Renders with `context` (a JSON object) as the variables. Its keys may not redefine the
  // built-in globals (true, none, range, namespace, raise_exception, strftime_now, ...).
  absl::StatusOr<std::string> RenderWithContext(
      const nlohmann::json& context, std::optional<TemplateDate> now = std::nullopt) const;
  // The same with object keys in their original order.
  absl::StatusOr<std::string> RenderWithOrderedContext(
      const nlohmann::ordered_json& context, std::optional<TemplateDate> now = std::nullopt) const;

  // The source of the template Render() uses when no tools are given.
  const std::string& source() const;
  bool has_tool_use_template() const { return tool_use_ != nullptr; }

 private:
  ChatTemplate(std::shared_ptr<const CompiledTemplate> main,
               std::shared_ptr<const CompiledTemplate> tool_use, const TemplateLimits& limits)
      : main_(std::move(main)), tool_use_(std::move(tool_use)), limits_(limits) {}

  template <typename Json>
  const CompiledTemplate& Choose(const Json& context) const;
  template <typename Json>
  absl::StatusOr<std::string> RenderCompiled(const CompiledTemplate& compiled, const Json& context,
                                             std::optional<TemplateDate> now) const;

  // Immutable once parsed, so copies of a ChatTemplate share them.
  std::shared_ptr<const CompiledTemplate> main_;
  std::shared_ptr<const CompiledTemplate> tool_use_;
  TemplateLimits limits_;
};

}  // namespace baton::templating
