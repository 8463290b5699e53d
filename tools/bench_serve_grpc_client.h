// A benchmark client for Baton's gRPC API: one server-streaming baton.v1.Baton/Generate
// call per request, timed per response message.
//
//   GrpcBenchClient client({.target = "127.0.0.1:50051"});
//   RequestResult r = client.Send(prompt);
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "baton/v1/baton.grpc.pb.h"
#include "tools/bench_serve_client.h"

namespace baton::tools {

struct GrpcClientOptions {
  std::string target;  // host:port
  RequestOptions request;
  // Each channel is one HTTP/2 connection; requests take them in turn. More than one
  // spreads many concurrent streams over several connections.
  int channels = 1;
};

baton::v1::GenerateRequest BuildGenerateRequest(const RequestOptions& options,
                                                const BenchPrompt& prompt);

class GrpcBenchClient : public BenchClient {
 public:
  explicit GrpcBenchClient(GrpcClientOptions options);

  RequestResult Send(const BenchPrompt& prompt) override;

 private:
  GrpcClientOptions options_;
  std::vector<std::unique_ptr<baton::v1::Baton::Stub>> stubs_;
  std::atomic<size_t> next_stub_{0};
};

}  // namespace baton::tools
