// One client request as the router runs it: `n` sequences on a worker, each streamed
// back as token ids that the router turns into text (ChoiceDecoder: incremental
// detokenization, stop strings). A stop string ends its sequence in the router, which then
// cancels it in the worker; EOS, stop ids and max_tokens end it in the worker.
//
// The worker's streams run on one of the router's CompletionLoops, so no router thread
// waits per token, and the thread that reads a token is the one that delivers it. Two ways
// to consume the deltas:
//
//   // Push: callbacks on the loop's thread; deltas one at a time, then on_done once.
//   auto gen = Generation::Start(loops, &worker, tokenizer, request, {on_delta, on_done});
//
//   // Pull: a thread blocks for each delta (simple callers and tests).
//   BATON_ASSIGN_OR_RETURN(auto gen, Generation::Start(loops, &worker, tokenizer, request));
//   ChoiceDelta d;
//   while (gen->Next(&d)) Send(d);          // deltas of all choices, interleaved
//   if (!gen->status().ok()) ...             // the first failure ends every choice
//
// Cancel() (any thread) stops every sequence in the worker at once; the destructor does
// too, and waits until every worker stream has ended. Each choice is one RequestRun
// (dispatch/request_run.h), which sequences it across the workers; a Generation joins the
// choices: their deltas into one stream, the first failure into the end of all. One
// choice reroutes itself (RequestRun). Several share their worker, so they move together:
// when one fails UNAVAILABLE before any choice delivered a delta, the others are
// cancelled and all start over, once, on the route RerouteAfterFailure picks.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "baton/internal/v1/worker.grpc.pb.h"
#include "dispatch/completion_loops.h"
#include "dispatch/generation_types.h"
#include "dispatch/request_run.h"
#include "dispatch/worker_pool.h"
#include "tokenizer/tokenizer.h"

namespace baton::dispatch {

struct GenerationCallbacks {
  // Never concurrent with itself. It must not block: it runs on a loop's thread, which
  // other requests' tokens wait for.
  std::function<void(const ChoiceDelta&)> on_delta;
  // Once, after the last on_delta: OK when every choice finished, else the first failure.
  // It must not destroy the Generation (the destructor waits for it to return).
  std::function<void(const absl::Status&)> on_done;
};

class Generation {
 public:
  // Pull mode: use Next().
  // `route` says where: one colocated worker, or a prefill and a decode worker (each
  // choice then prefills on its own, with the route's failover). The calls run on one of
  // `loops`' queues, which must outlive the generation.
  static absl::StatusOr<std::unique_ptr<Generation>> Start(
      CompletionLoops* loops, Route route, std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
      GenerationRequest request);
  // Push mode. The callbacks may run before Start returns.
  static absl::StatusOr<std::unique_ptr<Generation>> Start(
      CompletionLoops* loops, Route route, std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
      GenerationRequest request, GenerationCallbacks callbacks);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Pull mode: blocks for the next delta of any choice. False once every choice has
  // finished, or when one failed (status() says why; the others are cancelled).
  bool Next(ChoiceDelta* out);
  // Final once done (after on_done, or once Next returned false).
  absl::Status status() const;
  // Thread-safe: cancels every sequence in the worker; the generation then ends with
  // Cancelled (unless everything had finished).
  void Cancel();
  // Once done: where it ran last (a rerouted request's second route), and whether it was
  // rerouted.
  const Route& route() const { return runs_.front()->route(); }
  bool rerouted() const { return rerouted_ || runs_.front()->rerouted(); }

 private:
  Generation(GenerationRequest request, GenerationCallbacks callbacks);
  absl::Status StartRuns(grpc::CompletionQueue* cq, Route route,
                         std::shared_ptr<const tokenizer::Tokenizer> tokenizer);
  void OnDelta(const ChoiceDelta& d);
  void OnRunDone(const absl::Status& status);
  // On the first failure of several choices: the route to start them all over on, when
  // they may.
  std::optional<Route> StartOverRoute(const absl::Status& failure);
  void CancelRuns();

  GenerationRequest request_;
  GenerationCallbacks callbacks_;
  // What the runs started with, for a start-over: written before the runs start, then
  // only on the loop thread.
  grpc::CompletionQueue* cq_ = nullptr;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  Route attempt_route_;
  // One per choice; all on one queue, so their callbacks never overlap.
  std::vector<std::unique_ptr<RequestRun>> runs_;
  // The runs of the attempt before a start-over: ended, kept until the generation goes
  // (the last of them was still inside its on_done when they were replaced).
  std::vector<std::unique_ptr<RequestRun>> ended_runs_;
  // The loop thread's: the route of the start-over under way, and whether there was one.
  std::optional<Route> start_over_;
  bool rerouted_ = false;
  void StartOver();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  absl::Status status_;      // the first failure
  bool delivered_ = false;   // a delta went to the caller
  bool cancelled_ = false;   // Cancel() or the destructor
  bool restarting_ = false;  // this attempt's runs are being given up for a start-over
  int attempt_ = 0;          // start-overs so far
  int open_runs_ = 0;
  bool started_ = false;  // the runs were started (set before any callback can run)
  bool done_ = false;     // every run ended; on_done was handed its status
  // Pull mode's queue, filled by the push callbacks.
  std::deque<ChoiceDelta> queue_;
  bool pull_done_ = false;
};

}  // namespace baton::dispatch
