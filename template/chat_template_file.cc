#include "template/chat_template_file.h"

#include "common/mapped_file.h"
#include "common/status.h"
#include "common/strings.h"
#include "template/chat_template.h"

namespace baton::templating {

absl::Status UseChatTemplateFile(const std::string& path, nlohmann::json* tokenizer_config) {
  absl::StatusOr<std::string> source = ReadFileToString(path, size_t{1} << 20);
  if (!source.ok()) {
    return absl::Status(source.status().code(),
                        StrCat("--chat-template ", path, ": ", source.status().message()));
  }
  absl::StatusOr<ChatTemplate> parsed = ChatTemplate::Parse(*source);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(StrCat(
        "--chat-template ", path, " is not a template Baton can run: ", parsed.status().message()));
  }
  (*tokenizer_config)["chat_template"] = *std::move(source);
  return absl::OkStatus();
}

}  // namespace baton::templating
