// A benchmark client for the OpenAI-compatible HTTP API: POSTs a streamed (SSE)
// completion or chat completion and times its chunks. Boost.Beast over plain TCP, one
// blocking request per calling thread, with idle keep-alive connections reused.
//
//   BATON_ASSIGN_OR_RETURN(HttpUrl url, ParseHttpUrl("http://127.0.0.1:8000"));
//   HttpBenchClient client({.api = OpenAiApi::kChat, .url = url,
//                           .path = "/v1/chat/completions"});
//   RequestResult r = client.Send(prompt);
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tools/bench_serve_client.h"
#include "tools/bench_serve_sse.h"

namespace baton::tools {

struct HttpUrl {
  std::string host;  // without IPv6 brackets
  std::string port;
  std::string path;  // "" or "/prefix" (never a trailing slash)
};

// "http://host[:port][/path]"; https is refused (there is no TLS client here).
absl::StatusOr<HttpUrl> ParseHttpUrl(std::string_view url);

struct HttpClientOptions {
  OpenAiApi api = OpenAiApi::kCompletions;
  HttpUrl url;
  std::string path = "/v1/completions";  // appended to url.path
  RequestOptions request;
  // Merged into every request body last, so it can add or override any field.
  nlohmann::json extra_body = nlohmann::json::object();
};

// The JSON body of one streamed request.
std::string BuildOpenAiBody(const HttpClientOptions& options, const BenchPrompt& prompt);

class HttpBenchClient : public BenchClient {
 public:
  explicit HttpBenchClient(HttpClientOptions options);
  ~HttpBenchClient() override;

  RequestResult Send(const BenchPrompt& prompt) override;

  // GET <base>/v1/models and return the first model's id (what vLLM's bench does when
  // --model is not given).
  absl::StatusOr<std::string> FetchFirstModel();

 private:
  struct Connection;

  absl::StatusOr<std::unique_ptr<Connection>> Connect(BenchClock::time_point deadline);
  // Takes an idle connection, or opens one. *reused says which.
  absl::StatusOr<std::unique_ptr<Connection>> Acquire(BenchClock::time_point deadline,
                                                      bool* reused);
  void Release(std::unique_ptr<Connection> connection);

  HttpClientOptions options_;
  std::string host_header_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;
};

}  // namespace baton::tools
