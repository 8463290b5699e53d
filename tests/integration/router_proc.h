// A `baton-router` process for the multi-process tests, and a Generate call through its
// baton.v1 gRPC API.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "baton/v1/baton.grpc.pb.h"
#include "common/strings.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/worker_proc.h"
#include "tests/unit/transport/ucx_test_util.h"

namespace baton::testing {

namespace pb = ::baton::v1;

// A process whose first stdout line names its address(es).
struct Proc {
  std::unique_ptr<ChildProcess> process;
  std::string line;

  explicit Proc(std::vector<std::string> argv) {
    process = std::make_unique<ChildProcess>(argv);
    line = process->ReadLine();
  }
  std::string Match(const std::string& re) const {
    std::smatch m;
    if (!std::regex_search(line, m, std::regex(re))) {
      ADD_FAILURE() << "no '" << re << "' in '" << line << "'";
      return "";
    }
    return m[1].str();
  }
};

struct Router : Proc {
  int http_port = 0;
  std::unique_ptr<pb::Baton::Stub> stub;

  explicit Router(std::vector<std::string> workers)
      : Proc([&] {
          std::vector<std::string> argv = {BATON_ROUTER_BIN,
                                           "--model",
                                           std::string(BATON_SOURCE_DIR) + "/models/baton-tiny",
                                           "--port",
                                           "0",
                                           "--grpc-port",
                                           "0"};
          argv.insert(argv.end(), workers.begin(), workers.end());
          return argv;
        }()) {
    http_port = std::atoi(Match(R"(http://127\.0\.0\.1:(\d+))").c_str());
    stub = pb::Baton::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + Match(R"(gRPC 127\.0\.0\.1:(\d+))"), grpc::InsecureChannelCredentials()));
  }
};

struct Answer {
  std::vector<int32_t> ids;
  std::string text;
  std::string finish_reason;
  int logprobs = 0;
  int64_t cached_tokens = 0;  // usage: prompt tokens served from a prefix cache
  pb::Timings timings;        // from the final message
  grpc::Status status;
};

Answer Generate(Router& r, const pb::GenerateRequest& req, grpc::ClientContext* ctx = nullptr) {
  grpc::ClientContext local;
  if (ctx == nullptr) ctx = &local;
  auto reader = r.stub->Generate(ctx, req);
  Answer a;
  pb::GenerateResponse m;
  while (reader->Read(&m)) {
    a.ids.insert(a.ids.end(), m.token_ids().begin(), m.token_ids().end());
    a.text += m.text();
    a.logprobs += m.logprobs_size();
    if (m.finished()) {
      a.finish_reason = m.finish_reason();
      a.timings = m.timings();
    }
    if (m.has_usage()) a.cached_tokens = std::max(a.cached_tokens, m.usage().cached_tokens());
  }
  a.status = reader->Finish();
  return a;
}

// POST /v1/completions over a plain socket; the JSON body of the answer.
inline nlohmann::json Complete(int port, const nlohmann::json& body) {
  const std::string payload = body.dump();
  const std::string request = StrCat(
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Connection: close\r\nContent-Length: ",
      payload.size(), "\r\n\r\n", payload);
  const std::string answer = HttpExchange(port, request);
  if (answer.empty()) return nullptr;
  return nlohmann::json::parse(answer, nullptr, false);
}

// A Generate call on its own thread; `ctx` cancels it.
struct AsyncGenerate {
  grpc::ClientContext ctx;
  Answer answer;
  std::thread thread;
  AsyncGenerate(Router& r, const pb::GenerateRequest& req) {
    thread = std::thread([&, req] { answer = Generate(r, req, &ctx); });
  }
  ~AsyncGenerate() {
    if (thread.joinable()) thread.join();
  }
};

}  // namespace baton::testing
