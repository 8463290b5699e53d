#include "frontdoor/openai/served_model.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <type_traits>
#include <utility>

#include "absl/time/clock.h"
#include "common/param_error.h"
#include "common/status.h"
#include "common/strings.h"
#include "template/chat_prompt.h"
#include "template/chat_template_file.h"
#include "tokenizer/special_text_mask.h"

namespace baton::frontdoor {

namespace {

// The longest text, in bytes, whose tokens can fit in a context of `max_model_len`: no
// token stands for more bytes than the vocabulary's longest, and a normalizer shrinks
// text by at most a small factor (composing Hangul jamo: 9 bytes to 3). 0 (no bound) when
// an added token absorbs any amount of whitespace around it (lstrip/rstrip).
size_t MaxPromptBytes(const tokenizer::Tokenizer& t, int64_t max_model_len) {
  for (const tokenizer::AddedToken& a : t.vocab().added_tokens) {
    if (a.lstrip || a.rstrip) return 0;
  }
  size_t longest = 1;
  for (int32_t id = 0; id < t.vocab_size(); ++id)
    longest = std::max(longest, t.TokenBytes(id).size());
  const size_t shrink = t.vocab().normalizer.empty() ? 1 : 4;
  return static_cast<size_t>(std::max<int64_t>(max_model_len, 1)) * longest * shrink + 1024;
}

// Every template the tokenizer config names (a plain one, or a list such as Hermes'
// "default" and "tool_use"), read for the tool-call markup they render.
std::optional<toolcall::Format> ToolCallFormatOf(const nlohmann::json& config) {
  auto it = config.find("chat_template");
  if (it == config.end()) return std::nullopt;
  std::string sources;
  if (it->is_string()) sources = it->get<std::string>();
  if (it->is_array()) {
    for (const auto& entry : *it) {
      if (entry.is_object() && entry.contains("template") && entry["template"].is_string()) {
        sources += entry["template"].get<std::string>();
        sources += "\n";
      }
    }
  }
  return toolcall::DetectFormat(sources);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServedModel>> ServedModel::Load(
    const std::string& tokenizer_path, const std::string& served_name,
    dispatch::WorkerClient* worker, absl::Duration wait, bool parse_special_in_content,
    const std::string& chat_template_file) {
  auto m = std::unique_ptr<ServedModel>(new ServedModel());
  m->parse_special_in_content_ = parse_special_in_content;
  BATON_ASSIGN_OR_RETURN(m->files_, tokenizer::LoadTokenizerFiles(tokenizer_path));
  if (!chat_template_file.empty()) {
    BATON_RETURN_IF_ERROR(templating::UseChatTemplateFile(chat_template_file, &m->files_.config));
  }
  const absl::Time give_up = absl::Now() + wait;
  absl::StatusOr<baton::internal::v1::GetModelInfoResponse> info;
  for (;;) {
    info = worker->GetModelInfo(absl::Seconds(5));
    if (info.ok() || info.status().code() != absl::StatusCode::kUnavailable ||
        absl::Now() >= give_up) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (!info.ok()) return info.status();
  m->info_ = *std::move(info);
  if (m->info_.vocab_size() < m->files_.tokenizer->vocab_size()) {
    return absl::FailedPreconditionError(
        StrCat("the tokenizer at ", tokenizer_path, " has ", m->files_.tokenizer->vocab_size(),
               " tokens but the worker's model has ", m->info_.vocab_size(),
               "; give the router the worker's model with --model (or --tokenizer)"));
  }
  m->name_ = served_name.empty() ? m->info_.model_id() : served_name;
  m->max_prompt_bytes_ = MaxPromptBytes(*m->files_.tokenizer, m->info_.max_model_len());
  m->created_ = absl::ToUnixSeconds(absl::Now());
  m->tool_call_format_ = ToolCallFormatOf(m->files_.config);
  return m;
}

absl::Status ServedModel::CheckModelName(const std::string& model) const {
  if (model.empty() || model == name_) return absl::OkStatus();
  return absl::NotFoundError(
      StrCat("The model `", model, "` does not exist. This server serves `", name_, "`."));
}

absl::Status ServedModel::CheckPromptBytes(std::string_view text, std::string_view param) const {
  if (max_prompt_bytes_ == 0 || text.size() <= max_prompt_bytes_) return absl::OkStatus();
  // Refused before tokenizing: the tokens could not fit, and counting them costs the
  // router about a second of CPU per few MB.
  return ParamError(
      param, StrCat("This model's maximum context length is ", max_model_len(),
                    " tokens. However, your '", param, "' is ", text.size(),
                    " bytes, more than any ", max_model_len(), " tokens of this model can spell (",
                    max_prompt_bytes_, " bytes at most). Please reduce the length of the input."));
}

absl::StatusOr<std::vector<int32_t>> ServedModel::EncodeText(const std::string& text,
                                                             bool add_special_tokens) const {
  BATON_RETURN_IF_ERROR(CheckPromptBytes(text, "prompt"));
  return files_.tokenizer->Encode(text, {.add_special_tokens = add_special_tokens});
}

namespace {

// Calls `f` on every string value in `j` (not on keys).
template <typename J, typename F>
void ForEachString(J& j, const F& f) {
  if (j.is_string()) {
    f(j.template get_ref<
        std::conditional_t<std::is_const_v<J>, const std::string&, std::string&>>());
  } else if (j.is_structured()) {
    for (auto& item : j) ForEachString(item, f);
  }
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> ServedModel::EncodeChat(const nlohmann::ordered_json& chat,
                                                             bool add_generation_prompt,
                                                             bool add_special_tokens) const {
  // Special tokens' text inside the messages and tools is the client's text, not the
  // template's markers (tokenizer/special_text_mask.h), unless --parse-special-in-content.
  tokenizer::SpecialTextMask mask(files_.tokenizer.get());
  bool has_special_text = false;
  if (!parse_special_in_content_) {
    ForEachString(chat, [&](const std::string& s) {
      mask.Note(s);
      tokenizer::TextRange found;
      has_special_text = has_special_text || files_.tokenizer->FindSpecialText(s, 0, &found);
    });
  }
  nlohmann::ordered_json hidden;
  if (has_special_text) {
    hidden = chat;
    absl::Status hid = absl::OkStatus();
    ForEachString(hidden, [&](std::string& s) {
      if (hid.ok()) hid = mask.Hide(&s);
    });
    BATON_RETURN_IF_ERROR(hid);
  }
  absl::StatusOr<std::string> text = templating::RenderChatPrompt(
      files_.config, has_special_text ? hidden : chat, add_generation_prompt);
  if (!text.ok()) {
    // A template that raises (e.g. "roles must alternate") is the client's error.
    return absl::InvalidArgumentError(
        StrCat("the chat template rejected the messages: ", text.status().message()));
  }
  const std::vector<tokenizer::TextRange> literal = mask.Reveal(&*text);
  BATON_RETURN_IF_ERROR(CheckPromptBytes(*text, "messages"));
  return files_.tokenizer->Encode(*text,
                                  {.add_special_tokens = add_special_tokens, .literal = literal});
}

absl::Status ServedModel::CheckTokenIds(const std::vector<int32_t>& ids,
                                        std::string_view param) const {
  const int32_t vocab = files_.tokenizer->vocab_size();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return ParamError(param, StrCat("token id ", ids[i], " at position ", i, " of '", param,
                                      "' is outside the vocabulary [0, ", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace baton::frontdoor
