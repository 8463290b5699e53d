// A scripted worker on loopback gRPC, for the router's tests: the seam between the router
// and a worker is the worker's internal gRPC API, so the fake serves that API for real
// (baton.internal.v1.Worker, KvTransfer and grpc.health.v1) and the router's own client
// code runs unchanged against it.
//
//   FakeWorkerServer w;                        // listening on 127.0.0.1:<any>
//   w.worker.script = token_ids;               // Generate streams one id per message
//   w.worker.fail_after = 1;                   // ... then fails with fail_after_status
//   RouterOptions o; o.worker = w.target();
//   ... w.kv.WaitForRelease(10) ...            // the reservations the router gave back
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "baton/internal/v1/kv_transfer.grpc.pb.h"
#include "baton/internal/v1/worker.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "service/health_service.h"

namespace baton::fakes {

class FakeKvTransfer;

class FakeWorker final : public baton::internal::v1::Worker::Service {
 public:
  // Generate streams `script` one token per message. The last message is final (with
  // `finish_reason` and usage) unless `hang`: then the stream waits for the cancel.
  std::vector<int32_t> script;
  std::string finish_reason = "length";
  bool hang = false;
  grpc::Status fail = grpc::Status::OK;  // returned before any message
  int fail_after = -1;                   // >= 0: after this many messages, fail_after_status
  grpc::Status fail_after_status{grpc::StatusCode::INTERNAL, "the worker broke mid-stream"};
  // Prefill answers `prefill_fail` at once, or (prefill_hang) once the router has cancelled
  // the call, as a worker that finished just as the cancel came would.
  grpc::Status prefill_fail = grpc::Status::OK;
  bool prefill_hang = false;
  // GetModelInfo.
  std::string model_id = "fake";
  int32_t vocab_size = 0;
  int64_t block_size = 16;

  FakeKvTransfer* kv = nullptr;  // this worker's, for Generate's await (FakeWorkerServer)

  std::atomic<int> generates{0};
  std::atomic<int> prefills{0};
  std::atomic<int> cancelled{0};  // Generate streams that ended by the router's cancel
  std::mutex mu;
  std::vector<baton::internal::v1::GenerateRequest> requests;
  std::vector<baton::internal::v1::PrefillRequest> prefill_requests;

  grpc::Status Generate(grpc::ServerContext* ctx, const baton::internal::v1::GenerateRequest* req,
                        grpc::ServerWriter<baton::internal::v1::GenerateResponse>* writer) override;
  grpc::Status Prefill(grpc::ServerContext* ctx, const baton::internal::v1::PrefillRequest* req,
                       baton::internal::v1::PrefillResponse* out) override;
  grpc::Status GetModelInfo(grpc::ServerContext* ctx,
                            const baton::internal::v1::GetModelInfoRequest* req,
                            baton::internal::v1::GetModelInfoResponse* out) override;

  // Polls until `counter` reaches `at_least` (at most `seconds`); its value.
  static int WaitFor(const std::atomic<int>& counter, int at_least, int seconds = 10);
};

// A decode worker's side of KV transfers, without pages: a fake Prefill that succeeds
// completes its transfer here (the PrefillRequest names the decode worker), Release
// records the id, and a Generate that awaits its transfer (await_kv_transfer_ms) waits
// for one of the two.
class FakeKvTransfer final : public baton::internal::v1::KvTransfer::Service {
 public:
  grpc::Status Release(grpc::ServerContext* ctx, const baton::internal::v1::ReleaseRequest* req,
                       baton::internal::v1::ReleaseResponse* out) override;
  // The ids released, once at least `count` came or `seconds` passed.
  std::vector<std::string> WaitForRelease(int seconds, size_t count = 1);

  void Complete(const std::string& transfer_id);
  // OK once `transfer_id` is complete; ABORTED once released; CANCELLED when the call is;
  // DEADLINE_EXCEEDED after `wait_ms`.
  grpc::Status Await(const std::string& transfer_id, grpc::ServerContext* ctx, uint32_t wait_ms);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> released_;
  std::vector<std::string> completed_;
};

// The three services on one loopback port.
class FakeWorkerServer {
 public:
  FakeWorkerServer();
  ~FakeWorkerServer();
  const std::string& target() const { return target_; }
  // Stops it now: calls to it then fail UNAVAILABLE.
  void Shutdown();

  FakeWorker worker;
  FakeKvTransfer kv;

 private:
  service::HealthService health_{{""}};
  std::unique_ptr<grpc::Server> server_;
  std::string target_;
};

}  // namespace baton::fakes
