// A benchmark client for Baton's gRPC API: one server-streaming baton.v1.Baton/Generate
// call per request, timed per response message. Every call runs on one completion queue,
// polled by the loop thread alone.
//
//   GrpcBenchClient client({.target = "127.0.0.1:50051"});
//   RequestResult r = client.Send(prompt);  // or RunLoad(client, prompts, options)
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "baton/v1/baton.grpc.pb.h"
#include "grpcpp/completion_queue.h"
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
  // With no request in flight.
  ~GrpcBenchClient() override;

  void Start(const BenchPrompt& prompt, Done done) override;
  void Post(std::function<void()> fn) override;
  void Run() override;
  void Stop() override;

  // What the completion queue returns: each pending operation's tag is one of these.
  class Tag {
   public:
    virtual ~Tag() = default;
    // On the loop thread; `ok` is the completion queue's. The tag deletes itself when it
    // expects nothing more.
    virtual void Proceed(bool ok) = 0;
  };

 private:
  class Call;

  GrpcClientOptions options_;
  std::vector<std::unique_ptr<baton::v1::Baton::Stub>> stubs_;
  size_t next_stub_ = 0;  // the loop thread's
  grpc::CompletionQueue cq_;
  bool stopping_ = false;  // the loop thread's
};

}  // namespace baton::tools
