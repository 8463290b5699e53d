// One sequence's run across the workers: the only place that sequences a request over
// them. Both front doors use it (Generation for HTTP, one run per choice; GenerateCall for
// baton.v1, one run).
//
//   colocated route:  decode stream ──────────────────────────────────────► done
//   split route:      Prefill ─────────────────┐  both in flight at once; the decode
//                     decode stream (awaits the ┘  worker starts the stream when the
//                       transfer id)               transfer completes
//                       │ Prefill fails before the stream served: the stream is
//                       │ abandoned, then retry on another prefill worker, or prefill on
//                       │ the decode worker, or fail (DecideAfterPrefillFailure)
//   decode stream UNAVAILABLE before any message: reroute once (RerouteAfterFailure)
//   decode stream UNAVAILABLE after messages: migrate (Migrate) up to the pool's
//     migration_limit times (--migration-limit): another worker computes the prompt and the tokens
//     generated so far and streams on from there; the client sees one stream
//   a split attempt that ends before its decode stream delivered anything: ReleaseTransfer
//
// Every step runs on one completion queue's thread (a CompletionLoops loop), the first
// one too, so the steps and callbacks of a run never overlap, and no router thread waits
// per token. Only Cancel comes from other threads. The worker's messages are
// decoded here (ChoiceDecoder); a stop string cancels the sequence in the worker.
//
//   auto run = RequestRun::Start(cq, route, wire, decoder, options,
//                                {.on_delta = ..., .on_done = ...});
//   run->Cancel();   // any thread; on_done then says Cancelled unless the run had finished
//
// Lifetime: the owner keeps the run until on_done has been called. on_done is the run's
// last act, so the owner may destroy the run inside it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "baton/internal/v1/worker.grpc.pb.h"
#include "dispatch/choice_decoder.h"
#include "dispatch/completion_loops.h"
#include "dispatch/generation_types.h"
#include "dispatch/worker_pool.h"
#include "grpcpp/alarm.h"
#include "grpcpp/grpcpp.h"

namespace baton::dispatch {

// The worker's request for choice `choice` of `request` (the router keeps the stop
// strings; a seed moves by the choice index so that the choices differ).
absl::StatusOr<baton::internal::v1::GenerateRequest> WorkerRequest(const GenerationRequest& request,
                                                                   int choice);

struct RunOptions {
  std::optional<std::chrono::system_clock::time_point> deadline;
  // Start over once on another worker when the serving worker could not be reached
  // before it sent anything. Off for one choice of several: the others may be streaming
  // from the same route.
  bool may_reroute = true;
  std::string session;  // routing affinity for the reroute (prompt_cache_key)
  // The wire request asks for a trace: the workers' steps are gathered here, their times
  // moved to count from `arrival` (the router's), and handed out with the final delta.
  bool trace = false;
  std::chrono::steady_clock::time_point arrival;
};

struct RunCallbacks {
  // On the run's loop thread; it must not block (other requests' tokens wait for it). The
  // final delta of a sequence carries `prefill` (the split leg's timings).
  std::function<void(const ChoiceDelta&)> on_delta;
  // Once, after the last on_delta: OK when the sequence's final delta was produced;
  // Cancelled after Cancel(); else the failure (the worker's status, a bad message).
  std::function<void(const absl::Status&)> on_done;
};

class RequestRun {
 public:
  // Starts at once: the Prefill call on a split route, else the decode stream. `wire` is
  // the worker's request (WorkerRequest); a split route gives it a seed.
  static std::unique_ptr<RequestRun> Start(grpc::CompletionQueue* cq, Route route,
                                           baton::internal::v1::GenerateRequest wire,
                                           ChoiceDecoder decoder, RunOptions options,
                                           RunCallbacks callbacks);
  ~RequestRun();
  RequestRun(const RequestRun&) = delete;
  RequestRun& operator=(const RequestRun&) = delete;

  // Thread-safe and idempotent: cancels the call in flight (Prefill or decode stream).
  void Cancel();

  // Once on_done has run: where the run ended (a rerouted run's second route), whether it
  // was rerouted, and whether it started any call on a worker.
  const Route& route() const { return route_; }
  bool rerouted() const { return rerouted_; }
  // How many times the stream moved to another worker after it began.
  int migrations() const { return migrations_; }

 private:
  RequestRun(grpc::CompletionQueue* cq, Route route, baton::internal::v1::GenerateRequest wire,
             ChoiceDecoder decoder, RunOptions options, RunCallbacks callbacks);
  void OnBegin(bool ok);  // on the loop's thread: Begin
  void Begin();           // the first calls of the route: the decode stream, with Prefill if split
  void StartSplitAttempt();  // Prefill and the decode stream awaiting its transfer
  void StartPrefill();
  void OnPrefillDone(bool ok);
  void StartDecode();
  void OnDecodeStart(bool ok);
  void OnRead(bool ok);
  void OnDecodeFinish(bool ok);
  bool cancelled() const;
  // Starts the run over on another worker when that is safe; true when it did.
  bool Reroute();
  // Continues a stream that broke after it began on another worker, when that is safe;
  // true when it did.
  bool Migrate();
  int migration_limit() const;
  // Releases the decode worker's reservation when a split run ends before its decode
  // stream delivered anything.
  void ReleaseUnclaimedTransfer();
  // Once neither call is in flight: goes on (retry, local prefill, reroute) or ends.
  void Settle();
  void EndWithDecodeStatus();
  void End(absl::Status status);
  // A traced run: the decode message's steps, and the prefill leg once its reply is in.
  void TraceDecodeSteps();
  void TracePrefill();
  // Delivers a sequence's final delta, with the prefill's timings and the trace.
  void DeliverFinal(ChoiceDelta d);

  // How long the decode worker waits for a split attempt's transfer (the proto's bound);
  // the request's deadline and the router's cancel end the wait sooner.
  static constexpr uint32_t kAwaitKvTransferMs = 600000;

  grpc::CompletionQueue* cq_;
  Route route_;
  baton::internal::v1::GenerateRequest wire_;
  ChoiceDecoder decoder_;
  RunOptions options_;
  RunCallbacks callbacks_;
  bool rerouted_ = false;
  int migrations_ = 0;
  int messages_ = 0;  // from the decode worker, on this route
  // Every token the decode streams sent (a migrated stream goes on after them).
  std::vector<int32_t> generated_;
  absl::Status error_;            // a bad message from the worker
  bool prefill_pending_ = false;  // the calls of the attempt in flight
  bool decode_pending_ = false;
  bool prefill_failed_ = false;            // this attempt's Prefill failed (or was cancelled)
  bool abandoned_ = false;                 // the decode stream is drained, not delivered
  bool sequential_ = false;                // the decode stream waits for the Prefill's reply
  std::optional<ChoiceDelta> held_final_;  // until the prefill's timings are in

  // The calls in flight; swapped only on the loop thread, read by Cancel under mu_.
  mutable std::mutex mu_;
  bool cancelled_ = false;
  std::unique_ptr<grpc::ClientContext> decode_ctx_;
  std::unique_ptr<grpc::ClientContext> prefill_ctx_;

  std::unique_ptr<grpc::ClientAsyncReader<baton::internal::v1::GenerateResponse>> reader_;
  baton::internal::v1::GenerateResponse msg_;
  grpc::Status decode_status_;

  // The prefill leg of a split route; one attempt at a time.
  int attempt_ = 0;
  WorkerClient* prefill_ = nullptr;
  std::string transfer_id_;
  std::unique_ptr<grpc::ClientAsyncResponseReader<baton::internal::v1::PrefillResponse>>
      prefill_reader_;
  baton::internal::v1::PrefillRequest prefill_req_;
  baton::internal::v1::PrefillResponse prefill_resp_;
  grpc::Status prefill_status_;
  std::chrono::steady_clock::time_point prefill_started_;
  std::chrono::steady_clock::time_point decode_started_;
  std::shared_ptr<baton::v1::RequestTrace> trace_;  // RunOptions::trace
  PrefillTimings prefill_timings_;

  grpc::Alarm begin_alarm_;
  using Step = MemberTag<RequestRun>;
  Step begin_step_{this, &RequestRun::OnBegin};
  Step prefill_step_{this, &RequestRun::OnPrefillDone};
  Step start_step_{this, &RequestRun::OnDecodeStart};
  Step read_step_{this, &RequestRun::OnRead};
  Step finish_step_{this, &RequestRun::OnDecodeFinish};
};

}  // namespace baton::dispatch
