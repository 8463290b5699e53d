// A benchmark client for the OpenAI-compatible HTTP API: POSTs a streamed (SSE)
// completion or chat completion and times its chunks. Boost.Beast over plain TCP: every
// request runs on one asio loop, with idle keep-alive connections reused.
//
//   BATON_ASSIGN_OR_RETURN(HttpUrl url, ParseHttpUrl("http://127.0.0.1:8000"));
//   HttpBenchClient client({.api = OpenAiApi::kChat, .url = url,
//                           .path = "/v1/chat/completions"});
//   RequestResult r = client.Send(prompt);  // or RunLoad(client, prompts, options)
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tools/bench_serve_client.h"
#include "tools/bench_serve_sse.h"
#include "tools/http_call.h"

namespace baton::tools {

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

  void Start(const BenchPrompt& prompt, Done done) override;
  void Post(std::function<void()> fn) override;
  void Run() override;
  void Stop() override;

  // GET <base>/v1/models and return the first model's id (what vLLM's bench does when
  // --model is not given). Blocks; not while another thread runs the loop.
  absl::StatusOr<std::string> FetchFirstModel();

 private:
  struct Loop;
  struct Connection;
  class Exchange;

  HttpClientOptions options_;
  std::string host_header_;
  std::unique_ptr<Loop> loop_;
  // Kept-alive connections with no request on them; the loop thread's alone. Destroyed
  // before the loop their sockets belong to.
  std::vector<std::unique_ptr<Connection>> idle_;
};

}  // namespace baton::tools
