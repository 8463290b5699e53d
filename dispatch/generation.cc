#include "dispatch/generation.h"

#include <utility>

#include "common/status.h"

namespace baton::dispatch {

namespace pb = ::baton::internal::v1;

Generation::Generation(GenerationRequest request, GenerationCallbacks callbacks)
    : request_(std::move(request)), callbacks_(std::move(callbacks)) {}

absl::StatusOr<std::unique_ptr<Generation>> Generation::Start(
    CompletionLoops* loops, Route route, std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
    GenerationRequest request, GenerationCallbacks callbacks) {
  std::unique_ptr<Generation> g(new Generation(std::move(request), std::move(callbacks)));
  BATON_RETURN_IF_ERROR(g->StartRuns(loops->Pick(), std::move(route), std::move(tokenizer)));
  return g;
}

absl::StatusOr<std::unique_ptr<Generation>> Generation::Start(
    CompletionLoops* loops, Route route, std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
    GenerationRequest request) {
  std::unique_ptr<Generation> g(new Generation(std::move(request), GenerationCallbacks()));
  Generation* self = g.get();
  // Pull mode is push mode into a queue that Next() drains.
  g->callbacks_.on_delta = [self](const ChoiceDelta& d) {
    std::lock_guard<std::mutex> lock(self->mu_);
    self->queue_.push_back(d);
    self->cv_.notify_all();
  };
  g->callbacks_.on_done = [self](const absl::Status&) {
    std::lock_guard<std::mutex> lock(self->mu_);
    self->pull_done_ = true;
    self->cv_.notify_all();
  };
  BATON_RETURN_IF_ERROR(g->StartRuns(loops->Pick(), std::move(route), std::move(tokenizer)));
  return g;
}

absl::Status Generation::StartRuns(grpc::CompletionQueue* cq, Route route,
                                   std::shared_ptr<const tokenizer::Tokenizer> tokenizer) {
  cq_ = cq;
  tokenizer_ = tokenizer;
  attempt_route_ = route;
  const GenerationRequest& r = request_;
  if (r.n < 1) return absl::InvalidArgumentError("'n' must be at least 1");
  // Every request is built before any call starts, so a bad one leaves nothing running.
  std::vector<pb::GenerateRequest> wires;
  for (int i = 0; i < r.n; ++i) {
    BATON_ASSIGN_OR_RETURN(pb::GenerateRequest wire, WorkerRequest(r, i));
    wires.push_back(std::move(wire));
  }
  RunOptions options{.deadline = r.deadline,
                     .may_reroute = r.n == 1,
                     .session = r.session,
                     .trace = r.trace,
                     .arrival = r.arrival};
  int attempt;
  {
    std::lock_guard<std::mutex> lock(mu_);
    open_runs_ = r.n;
    started_ = true;
    attempt = attempt_;
  }
  // runs_ is filled under mu_ while earlier runs may already call back (CancelRuns reads
  // it); a run's callbacks never touch runs_ otherwise.
  for (int i = 0; i < r.n; ++i) {
    std::unique_ptr<RequestRun> run =
        RequestRun::Start(cq, route, std::move(wires[i]), ChoiceDecoder(i, tokenizer, r), options,
                          {.on_delta = [this](const ChoiceDelta& d) { OnDelta(d); },
                           .on_done = [this](const absl::Status& s) { OnRunDone(s); }});
    std::lock_guard<std::mutex> lock(mu_);
    if (attempt != attempt_) {
      // Every run of this attempt ended, this one too, and they started over meanwhile.
      ended_runs_.push_back(std::move(run));
      continue;
    }
    runs_.push_back(std::move(run));
    // An earlier choice failed already, or the caller cancelled.
    if (!status_.ok() || cancelled_ || restarting_) runs_.back()->Cancel();
  }
  return absl::OkStatus();
}

void Generation::OnDelta(const ChoiceDelta& d) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // After a failure nothing more is delivered, nor while the choices start over.
    if (!status_.ok() || restarting_) return;
    delivered_ = true;
  }
  callbacks_.on_delta(d);
}

std::optional<Route> Generation::StartOverRoute(const absl::Status& failure) {
  if (request_.n < 2 || rerouted_ || !absl::IsUnavailable(failure)) return std::nullopt;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (delivered_ || cancelled_) return std::nullopt;
  }
  absl::StatusOr<Route> next = RerouteAfterFailure(attempt_route_, request_.prompt_ids,
                                                   request_.cache_salt, request_.session);
  if (!next.ok()) return std::nullopt;
  return *std::move(next);
}

// Runs on the loop thread, as every run's callbacks do, so these calls never overlap.
void Generation::OnRunDone(const absl::Status& status) {
  std::function<void(const absl::Status&)> on_done;
  absl::Status final_status;
  bool cancel_others = false;
  bool start_over = false;
  if (!status.ok() && !start_over_ && this->status().ok()) {  // the first failure
    start_over_ = StartOverRoute(status);
    cancel_others = true;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (start_over_) {
      restarting_ = true;
    } else if (!status.ok() && status_.ok()) {
      status_ = status;
    }
    if (--open_runs_ == 0) {
      if (start_over_) {
        start_over = true;
      } else {
        on_done = std::move(callbacks_.on_done);
        final_status = status_;
      }
    }
  }
  if (cancel_others) CancelRuns();
  if (start_over) return StartOver();
  if (!on_done) return;
  on_done(final_status);
  // The destructor waits for this, so an owner may destroy the generation on any thread
  // once on_done has run, but not inside it.
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  cv_.notify_all();
}

// Every run of the failed attempt has ended; none delivered anything.
void Generation::StartOver() {
  Route route = *std::move(start_over_);
  start_over_.reset();
  rerouted_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& run : runs_) ended_runs_.push_back(std::move(run));
    runs_.clear();
    restarting_ = false;
    ++attempt_;
  }
  const absl::Status started = StartRuns(cq_, std::move(route), tokenizer_);
  if (started.ok()) return;
  // Not expected (the same requests were built once already), but answered.
  std::function<void(const absl::Status&)> on_done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = started;
    on_done = std::move(callbacks_.on_done);
  }
  on_done(started);
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  cv_.notify_all();
}

Generation::~Generation() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
  }
  CancelRuns();
  std::unique_lock<std::mutex> lock(mu_);
  // Runs that never started (Start failed) have nothing to wait for.
  cv_.wait(lock, [this] { return done_ || !started_; });
}

absl::Status Generation::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void Generation::Cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
  }
  CancelRuns();
}

void Generation::CancelRuns() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& run : runs_) run->Cancel();
}

bool Generation::Next(ChoiceDelta* out) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !queue_.empty() || pull_done_; });
  if (queue_.empty()) return false;
  *out = std::move(queue_.front());
  queue_.pop_front();
  return true;
}

}  // namespace baton::dispatch
