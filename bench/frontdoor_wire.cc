#include "bench/frontdoor_wire.h"

#include <utility>

#include "common/strings.h"
#include "nlohmann/json.hpp"

namespace baton::bench {

baton::internal::v1::GenerateRequest DirectRequest(const ExpectedStream& expected,
                                                   const std::string& request_id, int tokens) {
  baton::internal::v1::GenerateRequest req;
  req.set_request_id(request_id);
  req.add_prompt_ids(expected.ids[0]);
  req.mutable_params()->set_max_tokens(tokens);
  return req;
}

baton::v1::GenerateRequest RouterGrpcRequest(const std::string& request_id, int tokens) {
  baton::v1::GenerateRequest req;
  req.set_request_id(request_id);
  req.set_text("hello");
  req.mutable_sampling()->set_temperature(0);
  req.mutable_stop()->set_max_tokens(tokens);
  return req;
}

boost::beast::http::request<boost::beast::http::string_body> SseRequest(
    int port, const std::string& request_id, int tokens) {
  namespace http = boost::beast::http;
  http::request<http::string_body> req{http::verb::post, "/v1/completions", 11};
  req.set(http::field::host, StrCat("127.0.0.1:", port));
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, "text/event-stream");
  req.keep_alive(true);
  req.body() = StrCat(R"({"model":"stub","prompt":"hello","temperature":0,"stream":true,)",
                      R"("max_tokens":)", tokens, R"(,"request_id":")", request_id, R"("})");
  req.prepare_payload();
  return req;
}

absl::Status ConnectToRouter(boost::asio::ip::tcp::socket& socket, int port) {
  namespace net = boost::asio;
  boost::system::error_code ec;
  socket.connect(net::ip::tcp::endpoint(net::ip::make_address_v4("127.0.0.1"), port), ec);
  if (ec) return absl::UnavailableError(StrCat("connect to the router: ", ec.message()));
  socket.set_option(net::ip::tcp::no_delay(true), ec);
  return absl::OkStatus();
}

std::shared_ptr<grpc::Channel> OwnChannel(int port) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(),
                                   args);
}

StreamCheck::StreamCheck(const ExpectedStream& expected, std::string request_id, int tokens,
                         std::vector<Clock::time_point>* received)
    : expected_(expected),
      request_id_(std::move(request_id)),
      tokens_(tokens),
      received_(received) {}

absl::Status StreamCheck::Fail(std::string_view what) const {
  return absl::DataLossError(
      StrCat("request ", request_id_, " event ", index_, " of ", tokens_, ": ", what));
}

absl::Status StreamCheck::CheckNext(const int32_t* token_id, const std::string_view* text,
                                    bool finished, std::string_view finish_reason) const {
  if (index_ >= tokens_) return Fail("more events than max_tokens");
  const auto i = static_cast<size_t>(index_);
  if (token_id != nullptr && *token_id != expected_.ids[i]) {
    return Fail(StrCat("token id ", *token_id, ", expected ", expected_.ids[i]));
  }
  if (text != nullptr && *text != expected_.texts[i]) {
    return Fail(StrCat("text '", *text, "', expected '", expected_.texts[i], "'"));
  }
  const bool last = index_ == tokens_ - 1;
  if (finished != last) return Fail(last ? "the last event is not final" : "final too early");
  if (last && finish_reason != "length") {
    return Fail(StrCat("finish_reason '", finish_reason, "', expected 'length'"));
  }
  return absl::OkStatus();
}

void StreamCheck::OnDirect(const baton::internal::v1::GenerateResponse& msg, Clock::time_point t) {
  if (!ok()) return;
  if (msg.token_ids_size() != 1) {
    status_ = Fail(StrCat(msg.token_ids_size(), " token ids in one message"));
    return;
  }
  const int32_t id = msg.token_ids(0);
  status_ = CheckNext(&id, nullptr, msg.finished(), msg.finish_reason());
  received_->push_back(t);
  ++index_;
}

void StreamCheck::OnRouterGrpc(const baton::v1::GenerateResponse& msg, Clock::time_point t) {
  if (!ok()) return;
  const int count = msg.token_ids_size();
  if (count < 1 || index_ + count > tokens_) {
    status_ = Fail(StrCat("a message of ", count, " token ids"));
    return;
  }
  std::string want_text;
  for (int j = 0; j < count; ++j) {
    want_text += expected_.texts[static_cast<size_t>(index_)];
    const int32_t id = msg.token_ids(j);
    status_ = CheckNext(&id, nullptr, j == count - 1 && msg.finished(), msg.finish_reason());
    if (!ok()) return;
    ++index_;
  }
  if (msg.text() != want_text) {
    status_ = Fail(StrCat("message text '", msg.text(), "', expected '", want_text, "'"));
  } else if (msg.finished() && msg.usage().completion_tokens() != tokens_) {
    status_ = Fail(StrCat("usage says ", msg.usage().completion_tokens(), " tokens"));
  }
  received_->insert(received_->end(), static_cast<size_t>(count), t);
}

void StreamCheck::OnSseBytes(std::string_view bytes, Clock::time_point t) {
  sse_ = true;
  if (!ok()) return;
  sse_pending_.append(bytes);
  size_t start = 0;
  for (size_t end = sse_pending_.find("\n\n", start); end != std::string::npos && ok();
       end = sse_pending_.find("\n\n", start)) {
    OnSseEvent(std::string_view(sse_pending_).substr(start, end - start), t);
    start = end + 2;
  }
  sse_pending_.erase(0, start);
}

void StreamCheck::OnSseEvent(std::string_view event, Clock::time_point t) {
  constexpr std::string_view kData = "data: ";
  if (!event.starts_with(kData)) {
    status_ = Fail(StrCat("event '", event, "'"));
    return;
  }
  const std::string_view data = event.substr(kData.size());
  if (sse_done_) {
    status_ = Fail("data after [DONE]");
    return;
  }
  if (data == "[DONE]") {
    sse_done_ = true;
    return;
  }
  const nlohmann::json j = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("choices") || !j["choices"].is_array() ||
      j["choices"].empty() || !j["choices"][0].is_object()) {
    status_ = Fail(StrCat("event data '", data, "'"));
    return;
  }
  const nlohmann::json& c = j["choices"][0];
  const auto text_it = c.find("text");
  const std::string text =
      text_it != c.end() && text_it->is_string() ? text_it->get<std::string>() : "";
  const bool finished = c.contains("finish_reason") && c["finish_reason"].is_string();
  const std::string reason = finished ? c["finish_reason"].get<std::string>() : "";
  const std::string_view text_view = text;
  status_ = CheckNext(nullptr, &text_view, finished, reason);
  received_->push_back(t);
  ++index_;
}

absl::Status StreamCheck::Finish() const {
  if (!ok()) return status_;
  if (sse_ && !sse_done_)
    return absl::DataLossError(StrCat("request ", request_id_, ": no [DONE]"));
  if (index_ != tokens_) {
    return absl::DataLossError(
        StrCat("request ", request_id_, ": ", index_, " events of ", tokens_));
  }
  return absl::OkStatus();
}

}  // namespace baton::bench
