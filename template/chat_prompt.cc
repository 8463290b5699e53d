#include "template/chat_prompt.h"

#include "common/special_token_text.h"
#include "common/status.h"
#include "template/chat_template.h"

namespace baton::templating {

absl::StatusOr<std::string> RenderChatPrompt(const nlohmann::json& tokenizer_config,
                                             const nlohmann::ordered_json& request,
                                             bool add_generation_prompt,
                                             const std::string& template_name) {
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;
  if (request.is_array()) {
    messages = request;
  } else if (request.is_object() && request.contains("messages") &&
             request["messages"].is_array()) {
    messages = request["messages"];
    if (request.contains("tools")) tools = request["tools"];
  } else {
    return absl::InvalidArgumentError(
        "a chat request is a JSON list of messages, e.g. "
        "[{\"role\": \"user\", \"content\": \"Hi\"}], or an object with \"messages\" "
        "and optionally \"tools\"");
  }
  BATON_ASSIGN_OR_RETURN(ChatTemplate tmpl,
                         ChatTemplate::FromTokenizerConfig(tokenizer_config, template_name));
  nlohmann::ordered_json context;
  context["messages"] = std::move(messages);
  context["tools"] = std::move(tools);
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = SpecialTokenText(tokenizer_config, "bos_token");
  context["eos_token"] = SpecialTokenText(tokenizer_config, "eos_token");
  return tmpl.RenderWithOrderedContext(context);
}

}  // namespace baton::templating
