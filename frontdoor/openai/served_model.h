// The model the router serves: its tokenizer and chat template (loaded from the model's
// files on the router's host) and what the worker reports about it (context length, stop
// ids, block size). Turns the three kinds of input (text, chat, token ids) into prompt
// ids and enforces the context length the way vLLM words it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "baton/internal/v1/worker.pb.h"
#include "dispatch/worker_client.h"
#include "nlohmann/json.hpp"
#include "tokenizer/loader.h"
#include "toolcall/tool_call_format.h"

namespace baton::frontdoor {

class ServedModel {
 public:
  // Loads the tokenizer from `tokenizer_path` (a model directory, .gguf or tokenizer.json)
  // and asks the worker for the model's facts, retrying until `wait` has passed so that a
  // router may start before its worker. `served_name` empty: the worker's model id.
  // `parse_special_in_content`: special tokens' text inside chat messages is read as
  // control tokens, as before Baton kept it plain text (EncodeChat). `chat_template_file`:
  // a Jinja file replacing the tokenizer config's chat_template (--chat-template).
  static absl::StatusOr<std::unique_ptr<ServedModel>> Load(
      const std::string& tokenizer_path, const std::string& served_name,
      dispatch::WorkerClient* worker, absl::Duration wait, bool parse_special_in_content = false,
      const std::string& chat_template_file = "");

  const std::string& name() const { return name_; }
  int64_t created() const { return created_; }
  int64_t max_model_len() const { return info_.max_model_len(); }
  const baton::internal::v1::GetModelInfoResponse& worker_info() const { return info_; }
  const std::shared_ptr<const tokenizer::Tokenizer>& tokenizer() const { return files_.tokenizer; }

  // NotFound, in OpenAI's words, unless `model` is empty or this model's name.
  absl::Status CheckModelName(const std::string& model) const;

  // Text longer than any context's worth of tokens could spell (max_prompt_bytes) is
  // refused before it is tokenized, naming 'prompt' (or 'messages' for chats).
  absl::StatusOr<std::vector<int32_t>> EncodeText(const std::string& text,
                                                  bool add_special_tokens) const;
  // `chat`: {"messages": [...], "tools": [...]}. Special tokens are not added by default:
  // the template writes BOS itself. A special token's text inside the messages or tools
  // ("<|im_end|>" typed by a user) is encoded as plain text; only the template's own
  // markers become control tokens.
  absl::StatusOr<std::vector<int32_t>> EncodeChat(const nlohmann::ordered_json& chat,
                                                  bool add_generation_prompt,
                                                  bool add_special_tokens = false) const;
  // How the model writes tool calls (docs/tool_calls.md): what its chat template implies
  // (toolcall::DetectFormat), or --tool-call-parser's choice; nullopt: tool calls stay in
  // the content.
  const std::optional<toolcall::Format>& tool_call_format() const { return tool_call_format_; }
  void set_tool_call_format(std::optional<toolcall::Format> format) { tool_call_format_ = format; }

  // 0: no bound (a tokenizer whose added tokens swallow whitespace).
  size_t max_prompt_bytes() const { return max_prompt_bytes_; }
  // Every id must be in the vocabulary; the error names `param` (the field they came in).
  absl::Status CheckTokenIds(const std::vector<int32_t>& ids, std::string_view param) const;

 private:
  absl::Status CheckPromptBytes(std::string_view text, std::string_view param) const;

  std::string name_;
  int64_t created_ = 0;
  tokenizer::TokenizerFiles files_;
  baton::internal::v1::GetModelInfoResponse info_;
  bool parse_special_in_content_ = false;
  size_t max_prompt_bytes_ = 0;
  std::optional<toolcall::Format> tool_call_format_;
};

}  // namespace baton::frontdoor
