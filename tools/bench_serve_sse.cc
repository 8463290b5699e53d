#include "tools/bench_serve_sse.h"

#include <exception>

#include "common/strings.h"
#include "nlohmann/json.hpp"

namespace baton::tools {
namespace {

constexpr size_t kMaxQuotedBody = 300;

std::string Shorten(std::string_view text) {
  if (text.size() <= kMaxQuotedBody) return std::string(text);
  return StrCat(text.substr(0, kMaxQuotedBody), "...");
}

// The error message of an error object, or "" when `j` is not one.
std::string ErrorMessage(const nlohmann::json& j) {
  if (!j.is_object()) return "";
  if (auto it = j.find("error"); it != j.end() && !it->is_null()) {
    if (it->is_string()) return it->get<std::string>();
    if (it->is_object()) {
      auto msg = it->find("message");
      if (msg != it->end() && msg->is_string()) return msg->get<std::string>();
    }
    return it->dump();
  }
  if (auto it = j.find("object"); it != j.end() && it->is_string() && *it == "error") {
    auto msg = j.find("message");
    return msg != j.end() && msg->is_string() ? msg->get<std::string>() : j.dump();
  }
  return "";
}

int64_t IntField(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_number_integer() ? it->get<int64_t>() : -1;
}

bool NonEmptyString(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}

}  // namespace

absl::Status SseParser::Feed(std::string_view bytes, const EventFn& on_event) {
  for (char c : bytes) {
    if (skip_lf_) {
      skip_lf_ = false;
      if (c == '\n') continue;
    }
    if (c == '\r' || c == '\n') {
      skip_lf_ = c == '\r';
      absl::Status status = EndLine(on_event);
      if (!status.ok()) return status;
      continue;
    }
    line_.push_back(c);
    if (line_.size() + data_.size() > max_event_bytes_) {
      return absl::ResourceExhaustedError(
          StrCat("an SSE event is longer than ", max_event_bytes_, " bytes"));
    }
  }
  return absl::OkStatus();
}

absl::Status SseParser::EndLine(const EventFn& on_event) {
  std::string_view line = line_;
  absl::Status status;
  if (line.empty()) {
    if (has_data_) status = on_event(data_);
    data_.clear();
    has_data_ = false;
  } else if (line.front() != ':') {
    const size_t colon = line.find(':');
    std::string_view field = line.substr(0, colon);
    std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (field == "data") {
      if (has_data_) data_.push_back('\n');
      data_.append(value);
      has_data_ = true;
    }
  }
  line_.clear();
  return status;
}

absl::Status OpenAiStream::OnEvent(std::string_view data, BenchClock::time_point t) {
  if (done_) return absl::OkStatus();  // nothing after [DONE] counts
  if (data == "[DONE]") {
    done_ = true;
    return absl::OkStatus();
  }
  // nlohmann throws on malformed input and on type mismatches; neither may escape.
  try {
    const nlohmann::json chunk = nlohmann::json::parse(data);
    if (std::string error = ErrorMessage(chunk); !error.empty()) {
      return absl::InternalError(StrCat("error event in the stream: ", error));
    }
    if (!chunk.is_object()) {
      return absl::InternalError(StrCat("stream event is not a JSON object: ", Shorten(data)));
    }
    if (auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
      prompt_tokens_ = IntField(*usage, "prompt_tokens");
      completion_tokens_ = IntField(*usage, "completion_tokens");
      auto details = usage->find("prompt_tokens_details");
      if (details != usage->end() && details->is_object()) {
        cached_tokens_ = IntField(*details, "cached_tokens");
      }
    }
    auto choices = chunk.find("choices");
    if (choices == chunk.end() || !choices->is_array() || choices->empty()) {
      return absl::OkStatus();
    }
    const nlohmann::json& choice = (*choices)[0];
    if (!choice.is_object()) return absl::OkStatus();
    bool content = false;
    if (api_ == OpenAiApi::kCompletions) {
      content = NonEmptyString(choice, "text");
    } else if (auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
      // Reasoning models stream their thinking apart from the answer; it is output too.
      content = NonEmptyString(*delta, "content") || NonEmptyString(*delta, "reasoning_content") ||
                NonEmptyString(*delta, "reasoning");
    }
    if (content) clock_.OnContent(t);
  } catch (const std::exception& e) {
    return absl::InternalError(
        StrCat("stream event is not valid JSON (", e.what(), "): ", Shorten(data)));
  }
  return absl::OkStatus();
}

void OpenAiStream::Finish(BenchClock::time_point end, RequestResult* r) const {
  clock_.Finish(end, r);
  r->output_tokens = completion_tokens_ >= 0 ? completion_tokens_ : clock_.content_chunks();
  r->prompt_tokens = prompt_tokens_;
  r->cached_tokens = cached_tokens_;
}

std::string ErrorMessageFromBody(std::string_view body) {
  try {
    std::string message = ErrorMessage(nlohmann::json::parse(body));
    if (!message.empty()) return message;
  } catch (const std::exception&) {
    // Not JSON: quote the body as it is.
  }
  return body.empty() ? "(empty body)" : Shorten(body);
}

}  // namespace baton::tools
