// Fuzzes the chat-template engine: the input up to the first NUL byte is the template
// source, the rest becomes a string variable `fuzz` next to a small fixed conversation.
// Parse and Render run under small limits; any crash, sanitizer report or hang is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"
#include "template/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using baton::templating::ChatInputs;
  using baton::templating::ChatTemplate;
  using baton::templating::TemplateLimits;

  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view source = input.substr(0, nul);
  const std::string_view variable = nul == std::string_view::npos ? "" : input.substr(nul + 1);

  TemplateLimits limits;
  limits.max_output_bytes = 1 << 14;
  limits.max_loop_iterations = 1 << 12;
  limits.max_recursion_depth = 16;
  limits.max_source_bytes = 1 << 14;
  auto tmpl = ChatTemplate::Parse(source, limits);
  if (!tmpl.ok()) return 0;

  static const nlohmann::json kMessages = nlohmann::json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi \u00e9 \ud83d\ude00"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call00001", "type": "function",
       "function": {"name": "f", "arguments": {"x": [1, 2.5, true, null]}}}]},
    {"role": "tool", "tool_call_id": "call00001", "content": "42"}])");
  static const nlohmann::json kTools = nlohmann::json::parse(R"([
    {"type": "function", "function": {"name": "f", "description": "d",
     "parameters": {"type": "object", "properties": {"x": {"type": "array"}}}}}])");
  ChatInputs inputs;
  inputs.messages = kMessages;
  inputs.tools = (size & 1) != 0 ? kTools : nlohmann::json();
  inputs.bos_token = "<s>";
  inputs.eos_token = "</s>";
  inputs.extra = {{"fuzz", std::string(variable)}};
  inputs.now = baton::templating::TemplateDate{2025, 3, 9, 14, 5};
  (void)tmpl->Render(inputs);
  return 0;
}
