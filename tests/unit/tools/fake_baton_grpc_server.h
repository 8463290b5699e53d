// A baton.v1.Baton server for the benchmark client's tests: Generate streams canned
// deltas with set delays and counts the streams open at once; the other RPCs are
// unimplemented.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "baton/v1/baton.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace baton::tools::testing {

class FakeBatonServer final : public baton::v1::Baton::Service {
 public:
  struct Behavior {
    int deltas = 5;
    int ids_per_delta = 1;
    std::chrono::milliseconds first_delay{0};
    std::chrono::milliseconds delta_delay{0};
    bool usage = true;
    int completion_tokens = -1;  // -1: the ids sent
    bool finish = true;          // send the finished message
    grpc::StatusCode code = grpc::StatusCode::OK;
    std::string message = "";
  };

  explicit FakeBatonServer(Behavior behavior) : behavior_(behavior) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakeBatonServer() override { server_->Shutdown(); }

  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  int max_active() const { return max_active_; }
  int calls() const { return calls_; }
  std::vector<baton::v1::GenerateRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  std::vector<std::string> authorizations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return authorizations_;
  }

  grpc::Status Generate(grpc::ServerContext* context, const baton::v1::GenerateRequest* request,
                        grpc::ServerWriter<baton::v1::GenerateResponse>* writer) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(*request);
      auto auth = context->client_metadata().find("authorization");
      authorizations_.push_back(auth == context->client_metadata().end()
                                    ? ""
                                    : std::string(auth->second.data(), auth->second.size()));
    }
    ++calls_;
    const int now = ++active_;
    int seen = max_active_;
    while (now > seen && !max_active_.compare_exchange_weak(seen, now)) {
    }
    // The count drops before the status goes out: a client cannot see its call end
    // while the server still counts it.
    struct Leave {
      std::atomic<int>* active;
      ~Leave() { --*active; }
    } leave{&active_};

    const Behavior& b = behavior_;
    if (b.code != grpc::StatusCode::OK) return grpc::Status(b.code, b.message);
    std::this_thread::sleep_for(b.first_delay);
    int sent = 0;
    for (int i = 0; i < b.deltas; ++i) {
      if (i > 0) std::this_thread::sleep_for(b.delta_delay);
      baton::v1::GenerateResponse delta;
      delta.set_request_id("r");
      for (int k = 0; k < b.ids_per_delta; ++k) delta.add_token_ids(100 + sent++);
      delta.set_text("x");
      writer->Write(delta);
    }
    if (b.finish) {
      baton::v1::GenerateResponse last;
      last.set_finished(true);
      last.set_finish_reason("length");
      if (b.usage) {
        last.mutable_usage()->set_prompt_tokens(request->token_ids().ids_size());
        last.mutable_usage()->set_cached_tokens(2);
        last.mutable_usage()->set_completion_tokens(b.completion_tokens >= 0 ? b.completion_tokens
                                                                             : sent);
      }
      writer->Write(last);
    }
    return grpc::Status::OK;
  }

 private:
  const Behavior behavior_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  mutable std::mutex mu_;
  std::vector<baton::v1::GenerateRequest> requests_;
  std::vector<std::string> authorizations_;
  std::atomic<int> active_{0};
  std::atomic<int> max_active_{0};
  std::atomic<int> calls_{0};
};

}  // namespace baton::tools::testing
