#include "tools/tokenize_command.h"

#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "common/strings.h"
#include "nlohmann/json.hpp"
#include "template/chat_prompt.h"
#include "tokenizer/loader.h"

namespace baton::tools {
namespace {

using tokenizer::TokenId;

struct TokenizeFlags {
  std::string tokenizer;
  bool no_special = false;
  bool no_parse_special = false;
  bool decode = false;
  bool keep_special = false;
  bool chat = false;
  bool no_generation_prompt = false;
  std::string template_name;
  size_t max_input_bytes = size_t{16} << 20;
};

// The largest stdin this command reads; Encode enforces its own, smaller limit.
constexpr size_t kMaxStdinBytes = size_t{256} << 20;

absl::StatusOr<std::string> ReadStdin() {
  std::string data;
  char buf[1 << 16];
  while (std::cin.read(buf, sizeof(buf)) || std::cin.gcount() > 0) {
    data.append(buf, static_cast<size_t>(std::cin.gcount()));
    if (data.size() > kMaxStdinBytes) {
      return absl::InvalidArgumentError(
          baton::StrCat("stdin is larger than ", kMaxStdinBytes, " bytes"));
    }
  }
  return data;
}

absl::Status Run(const TokenizeFlags& flags) {
  tokenizer::LoadOptions load;
  load.limits.max_input_bytes = flags.max_input_bytes;
  BATON_ASSIGN_OR_RETURN(tokenizer::TokenizerFiles files,
                         tokenizer::LoadTokenizerFiles(flags.tokenizer, load));
  BATON_ASSIGN_OR_RETURN(std::string input, ReadStdin());
  const auto& tok = *files.tokenizer;

  if (flags.decode) {
    std::vector<TokenId> ids;
    for (absl::string_view word :
         absl::StrSplit(input, absl::ByAnyChar(" \t\r\n,"), absl::SkipEmpty())) {
      int32_t id = 0;
      if (!absl::SimpleAtoi(word, &id)) {
        return absl::InvalidArgumentError(baton::StrCat(
            "--decode reads token ids separated by spaces; '", word, "' is not an integer"));
      }
      ids.push_back(id);
    }
    BATON_ASSIGN_OR_RETURN(std::string text,
                           tok.Decode(ids, {.skip_special_tokens = !flags.keep_special}));
    std::cout << text << "\n";
    return absl::OkStatus();
  }

  bool add_special = !flags.no_special;
  if (flags.chat) {
    // ordered_json keeps the client's key order, which `tools | tojson` prints.
    nlohmann::ordered_json request =
        nlohmann::ordered_json::parse(input, nullptr, /*allow_exceptions=*/false);
    if (request.is_discarded()) {
      return absl::InvalidArgumentError(
          "--chat reads a JSON list of messages on stdin, e.g. "
          "[{\"role\": \"user\", \"content\": \"Hi\"}], or an object with \"messages\" "
          "and optionally \"tools\"");
    }
    BATON_ASSIGN_OR_RETURN(
        input, templating::RenderChatPrompt(files.config, request, !flags.no_generation_prompt,
                                            flags.template_name));
    // The template writes BOS itself, as transformers' apply_chat_template assumes.
    add_special = false;
  }
  BATON_ASSIGN_OR_RETURN(std::vector<TokenId> ids,
                         tok.Encode(input, {.add_special_tokens = add_special,
                                            .parse_special = !flags.no_parse_special}));
  std::cout << absl::StrJoin(ids, " ") << "\n";
  return absl::OkStatus();
}

}  // namespace

void AddTokenizeCommand(CLI::App& app) {
  auto flags = std::make_shared<TokenizeFlags>();
  CLI::App* cmd =
      app.add_subcommand("tokenize", "Read text on stdin and print its token ids, space-separated");
  cmd->add_option("--tokenizer", flags->tokenizer,
                  "A tokenizer.json, a .gguf file, or a model directory holding either")
      ->required()
      ->envname("BATON_TOKENIZER");
  cmd->add_flag("--no-special", flags->no_special, "Add no BOS/EOS tokens");
  cmd->add_flag("--no-parse-special", flags->no_parse_special,
                "Treat the text of special tokens (e.g. <|eot_id|>) as plain text");
  // Not BATON_DECODE: that is `baton serve --decode`, a count of workers.
  cmd->add_flag("--decode", flags->decode, "Read ids on stdin and print their text")
      ->envname("BATON_TOKENIZE_DECODE");
  cmd->add_flag("--keep-special", flags->keep_special,
                "With --decode, print special tokens instead of skipping them");
  cmd->add_flag("--chat", flags->chat,
                "Read a JSON list of messages (or {\"messages\": [...], \"tools\": [...]}) and "
                "render it through the model's chat template first");
  cmd->add_flag("--no-generation-prompt", flags->no_generation_prompt,
                "With --chat, do not open an assistant turn at the end");
  cmd->add_option("--template-name", flags->template_name,
                  "With --chat, which named chat template to use (default: 'default')");
  cmd->add_option("--max-input-bytes", flags->max_input_bytes, "Refuse longer input (bytes)")
      ->envname("BATON_MAX_INPUT_BYTES")
      ->check(CLI::PositiveNumber);
  cmd->callback([flags] {
    absl::Status status = Run(*flags);
    if (!status.ok()) {
      std::cerr << "baton tokenize: " << status.message() << "\n";
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace baton::tools
