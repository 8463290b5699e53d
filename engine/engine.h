// The serving engine: continuous batching over one model, on one engine thread.
//
//   BATON_ASSIGN_OR_RETURN(auto engine, Engine::Create(&loaded, EngineOptions{}));
//   BATON_ASSIGN_OR_RETURN(auto stream, engine->Submit(request));
//   TokenEvent e;
//   while (stream->Next(&e)) { ... e.token_ids, e.text ... if (e.finished) break; }
//   engine->Cancel(request.id);   // from any thread, at any time
//
// The engine thread runs schedule -> forward -> sample -> emit each step (see
// scheduler.h for the policy). Submit, Cancel, Stats and the KV-event calls are
// thread-safe and never touch engine state: they go through a queue the engine thread
// drains at the start of every step.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/thread_pool.h"
#include "engine/backend.h"
#include "engine/grammar_cache.h"
#include "engine/kv_host_mirror.h"
#include "engine/loaded_model.h"
#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"
#include "engine/scheduler.h"
#include "engine/step_trace.h"
#include "engine/stop_conditions.h"
#include "kvcache/block_manager.h"
#include "kvcache/kv_events.h"
#include "kvcache/kv_pool.h"
#include "kvcache/kv_sink.h"
#include "model/shard.h"

namespace baton::engine {

struct TokenEvent;

struct EngineOptions {
  int threads = 0;  // compute threads; 0: one per core
  int64_t block_size = 16;
  // KV cache size: kv_cache_bytes when > 0, else kv_cache_fraction of the memory
  // available at start-up. Whole pages only.
  int64_t kv_cache_bytes = 0;
  double kv_cache_fraction = 0.25;
  // The KV pages' element type (--kv-cache-dtype): "bf16", what GPU workers hold, so that
  // CPU and GPU workers can exchange pages; or "f32", exact for comparisons with f32
  // references. K and V are rounded to bf16 as they are written (docs/engine.md).
  std::string kv_cache_dtype = "bf16";
  // Where the KV pool's memory comes from. Unset, or returning null: the engine maps it
  // itself. Else it is handed the pool's size in bytes and returns page-aligned memory
  // (its contents do not matter: a page is written before it is read) that outlives the
  // engine (a worker that receives KV over shared memory lets
  // UCX allocate it, so that a peer's puts land in it directly: docs/transport.md).
  std::function<absl::StatusOr<void*>(size_t bytes)> kv_pool_memory;
  // When the pool's pages are a GPU's: their host copy, which KV transfers use
  // (engine/kv_host_mirror.h); it must outlive the engine. Null: the pages are on the host.
  KvHostMirror* kv_host_mirror = nullptr;
  bool enable_prefix_cache = true;
  int64_t max_running = 256;          // sequences decoding together
  int64_t max_waiting = 4096;         // queued requests; more is an overload error
  int64_t max_batched_tokens = 2048;  // tokens per step
  int64_t max_prefill_chunk = 512;    // prompt tokens per sequence per step
  int64_t max_model_len = 0;          // prompt + output tokens; 0: max_position_embeddings
  std::string model_id;               // for block hashes; defaults to the model's name
  SamplingLimits sampling_limits;
  // Tests only: a pause after every step with work, so that a short prompt takes long
  // enough to interrupt a transfer midway on any machine and transport.
  std::chrono::milliseconds debug_step_delay{0};
  // A worker group's leader (engine/parallel/worker_group.h): the model holds this rank's
  // shard, the pool holds the shard's layers and KV heads, and `backend` (called once the
  // pool exists) runs the group's forward. Unset: one rank on the CPU backend.
  std::optional<model::Shard> shard;
  std::function<absl::StatusOr<std::unique_ptr<Backend>>(kvcache::KvPool* pool,
                                                         ThreadPool* threads)>
      backend;
  // Observers for metrics (worker/worker_metrics.h), called on the engine thread, so they
  // must be quick and must not call the engine: once per step with the tokens it
  // computed, and once per ended request with its final event (usage, timings, finish
  // reason, status) before the consumer gets it.
  std::function<void(int64_t tokens)> on_step;
  std::function<void(const TokenEvent& last)> on_request_end;
};

struct EngineRequest {
  std::string id;  // unique among live requests; empty: the engine assigns one
  std::vector<int32_t> prompt_ids;
  SamplingParams params;
  int priority = 0;        // lower runs first (vLLM's convention)
  std::string cache_salt;  // separates tenants' prefix caches
  bool detokenize = true;  // produce text deltas and apply stop strings
  // Prefill role: also hand each layer's K/V of the prompt to this sink as it is computed
  // (engine/kv_sink.h). Such a request normally asks for one token.
  std::shared_ptr<kvcache::KvSink> kv_sink;
  // Decode role: the id of a completed KV transfer (ReserveKv, then CompleteKv) whose
  // pages hold this prompt's K/V. The request starts from the transfer's first token
  // instead of computing the prompt; prompt_ids must equal the reserved prompt (else the
  // request fails and the reservation is freed: the claim ends its lease).
  std::string kv_transfer_id;
  // Tokens this sequence already generated elsewhere (a stream migrated from a worker that
  // died): they are computed after the prompt and count as output, so sampling goes on
  // where it stopped (the seed's position, the penalties), max_tokens counts them, usage
  // reports them as completion tokens, and the stream starts with the token after them.
  std::vector<int32_t> output_ids;
  // Record the steps this request takes part in (engine/step_trace.h); its events then
  // carry them. Its sampler computes at least kTraceTopLogprobs top logprobs, but the
  // events' `logprobs` stay as params.logprobs asks.
  bool trace = false;
};

// Pages reserved for a prompt whose K/V another worker computes (the decode role's side
// of a KV transfer).
struct KvReservation {
  // The prompt's blocks [0, cached_blocks) were already in this engine's prefix cache;
  // pages[i] is reserved for block cached_blocks + i, through the prompt's last
  // (possibly partial) block.
  int64_t cached_blocks = 0;
  std::vector<kvcache::BlockHash> cached_hashes;  // the chained hashes of blocks [0, cached_blocks)
  std::vector<int32_t> pages;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
  int64_t completion_tokens = 0;
};

struct RequestTimings {
  double queue_seconds = 0;  // arrival to first scheduled
  double time_to_first_token_seconds = 0;
  double total_seconds = 0;  // arrival to finish
  int num_preemptions = 0;
};

struct TokenEvent {
  std::vector<int32_t> token_ids;      // new tokens (usually one)
  std::string text;                    // their text, once final (see generator.h)
  std::vector<SampledToken> logprobs;  // one per token when params.logprobs >= 0
  double seconds_since_arrival = 0;
  bool finished = false;
  // Set on the final event:
  FinishReason finish_reason = FinishReason::kNone;
  std::string stop_reason;  // the stop string, or the stop token id; else empty
  absl::Status status;      // Cancelled, or the error that ended the request
  // On the final event; the first token's event also has the prompt and cached counts and
  // the queue and first-token times.
  Usage usage;
  RequestTimings timings;
  // EngineRequest::trace: the steps since the previous event, and whether the request
  // stopped recording at kMaxTraceSteps.
  std::vector<StepTrace> trace_steps;
  bool trace_truncated = false;
};

// The consumer's end of one request. Thread-safe.
class RequestStream {
 public:
  explicit RequestStream(std::string id) : id_(std::move(id)) {}
  const std::string& id() const { return id_; }

  // Blocks for the next event; false once the final event has been taken.
  bool Next(TokenEvent* out);
  // As Next, but gives up after `timeout_ms` (returns false and sets *timed_out).
  bool NextFor(TokenEvent* out, int64_t timeout_ms, bool* timed_out);
  // Without waiting: moves every queued event to the end of *out (through the final one)
  // and returns how many it moved.
  size_t TakeAll(std::vector<TokenEvent>* out);

  // For consumers that must not block a thread per stream (the worker's async Generate):
  // `on_event` runs on the pushing thread after every Push, and once now if events are
  // already queued. It should only schedule work (take events with TakeAll elsewhere or
  // right there). Null stops the calls; once SetListener returns, no call is running.
  void SetListener(std::function<void()> on_event);

  void Push(TokenEvent event);  // the engine's side

 private:
  std::string id_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TokenEvent> events_;
  bool done_ = false;  // the final event was taken
  // Held while the listener runs, so that clearing it waits for a call in progress.
  std::mutex listener_mu_;
  std::function<void()> listener_;
};

struct EngineStats {
  int64_t running = 0;
  int64_t waiting = 0;
  int64_t pages_total = 0;
  int64_t pages_used = 0;  // referenced by running sequences
  int64_t pages_free = 0;  // free or cached-and-idle (evictable)
  int64_t pages_cached = 0;
  int64_t prefix_queried_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  double prefix_hit_rate = 0;  // hit / queried, 0 when nothing was queried
  int64_t preemptions = 0;
  int64_t steps = 0;
  int64_t requests_finished = 0;
  int64_t requests_cancelled = 0;
  int64_t requests_failed = 0;
  int64_t prompt_tokens_computed = 0;
  int64_t generated_tokens = 0;
  int64_t kv_reservations = 0;        // reserved for incoming KV transfers, not yet admitted
  int64_t kv_pages_reserved = 0;      // pages those hold (also counted in pages_used)
  int64_t kv_transfers_admitted = 0;  // requests started from a received prompt
};

class Engine {
 public:
  // `model` must outlive the engine. Starts the engine thread.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const LoadedModel* model,
                                                        const EngineOptions& options);
  ~Engine();  // stops the thread; open streams end with Cancelled
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Checks the request (InvalidArgument naming the parameter; ResourceExhausted when the
  // queue is full; AlreadyExists for a live id) and queues it.
  absl::StatusOr<std::shared_ptr<RequestStream>> Submit(EngineRequest request);
  // NotFound when no live request has the id. The stream ends with Cancelled and the
  // pages are free before the next step.
  absl::Status Cancel(const std::string& id);
  EngineStats Stats() const;

  kvcache::KvEventPublisher& kv_events() { return *events_; }
  // Empties the prefix cache once no request is running (AllCleared event).
  absl::Status ResetPrefixCache();

  // Decode role. Reserves pages for `prompt_ids` under `transfer_id` (1 to 256 bytes,
  // unique among live reservations): the prompt's blocks already in the prefix cache are
  // held, and fresh pages cover the rest. InvalidArgument for a bad prompt (as Submit);
  // ResourceExhausted, naming the pages needed and free, when they are not free now.
  // Leases (deadlines) are the caller's: it releases what it does not use.
  absl::StatusOr<KvReservation> ReserveKv(const std::string& transfer_id,
                                          std::vector<int32_t> prompt_ids,
                                          const std::string& cache_salt);
  // The reserved pages now hold the prompt's K/V; `first` is the token the prefill worker
  // sampled, `cached_tokens` the prompt tokens its prefix cache served (reported in
  // usage). A request with kv_transfer_id may now claim it. NotFound when no such
  // reservation is live; FailedPrecondition when it was already completed.
  absl::Status CompleteKv(const std::string& transfer_id, SampledToken first,
                          int64_t cached_tokens);
  // Frees a reservation that no request claimed. NotFound when none is live.
  absl::Status ReleaseKv(const std::string& transfer_id);
  // The page pool's memory on the host, for registering it with a transport: the pool
  // itself, or its host mirror when the pages are a GPU's. Pages are layout.page_bytes()
  // apart from page 0.
  std::byte* kv_pool_data() {
    return options_.kv_host_mirror != nullptr ? options_.kv_host_mirror->data()
                                              : pool_->block_data(0);
  }
  // One token's K/V in this engine's pool (every layer it holds, K and V).
  int64_t kv_bytes_per_token() const { return pool_->layout().page_bytes() / options_.block_size; }
  int64_t kv_pool_bytes() const { return pool_->num_blocks() * pool_->layout().page_bytes(); }
  const kvcache::PageLayout& kv_layout() const { return pool_->layout(); }
  // The chained hashes of the full blocks of `prompt_ids` in `cache_salt`'s namespace.
  std::vector<kvcache::BlockHash> PromptBlockHashes(std::span<const int32_t> prompt_ids,
                                                    const std::string& cache_salt) const;

  int64_t num_kv_pages() const { return pool_->num_blocks(); }
  const LoadedModel& model() const { return *model_; }
  const EngineOptions& options() const { return options_; }
  const SchedulerConfig& scheduler_config() const { return scheduler_->config(); }
  // Blocks until no request is queued or running (for tests and benchmarks).
  void WaitIdle();
  // OK while the backend works; once a worker group loses a rank, the error that broke
  // it: every request then fails with Unavailable, and health checks report it.
  absl::Status health() const;

 private:
  struct Live;  // per-request engine-thread state
  // When the parts of one step ended, for traced requests (RecordTrace).
  struct StepClock {
    std::chrono::steady_clock::time_point start, forwarded, sampled;
    // Per plan item: when each layer's K/V went to its sink (traced items with sinks).
    std::vector<std::vector<std::chrono::steady_clock::time_point>> layer_done;
    std::vector<double> drain_seconds;  // per plan item
  };
  struct Reserved;
  Engine(const LoadedModel* model, const EngineOptions& options);
  // Runs `task` on the engine thread before its next step and waits for it.
  absl::Status RunOnEngineThread(std::function<absl::Status()> task);
  absl::Status CheckPrompt(std::span<const int32_t> prompt_ids) const;
  // EngineRequest::output_ids: in the vocabulary, fewer than `max_output`, no KV transfer.
  absl::Status CheckOutputIds(const EngineRequest& request, int64_t max_output) const;
  void ReleasePages(std::span<const int32_t> pages);  // engine thread
  // Binds the sampler to the request's grammar, if it has one, replaying `output_ids`.
  absl::Status ConstrainSampler(Live* live, std::span<const int32_t> output_ids) const;
  // Frees a reservation's pages and forgets it: engine thread.
  void DropReservation(absl::flat_hash_map<std::string, std::unique_ptr<Reserved>>::iterator it);
  // Starts a request whose prompt arrived by KV transfer: engine thread, in DrainInbox.
  void AdmitTransferred(std::unique_ptr<Live> live);
  // The engine-thread side of a sampled token: stop checks, text, and the event; ends the
  // request when it finishes.
  void EmitToken(uint64_t seq_id, SampledToken token, std::chrono::steady_clock::time_point at);
  void Loop();
  void DrainInbox();
  void Step();
  void Emit(Live* live, TokenEvent event);
  // Moves a traced request's recorded steps into `e`.
  static void TakeTrace(Live* live, TokenEvent* e);
  // Records the step for each traced request of `plan` (engine thread, after sampling);
  // `ended[i]`: item i's request has ended in this step (its Sequence is gone).
  void RecordTrace(const StepPlan& plan, std::span<const SampledToken> tokens,
                   std::span<const std::optional<int32_t>> sampled, const std::vector<bool>& ended,
                   const StepClock& clock);
  // Ends a request with a final event carrying `last` (its last token, if any).
  void End(uint64_t seq_id, TokenEvent last);
  void PublishStatsLocked();  // engine thread, with mu_ held

  const LoadedModel* model_;
  EngineOptions options_;
  int64_t sampleable_vocab_ = 0;            // SampleableVocab(*model_)
  std::unique_ptr<GrammarCache> grammars_;  // constrained requests' grammars, shared
  kvcache::BlockHash root_without_salt_;
  std::unique_ptr<ThreadPool> threads_;
  std::unique_ptr<kvcache::KvPool> pool_;
  std::unique_ptr<kvcache::KvEventPublisher> events_;
  std::unique_ptr<kvcache::BlockManager> blocks_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Backend> runner_;

  // Shared with other threads, under mu_.
  mutable std::mutex mu_;
  std::condition_variable wake_;     // the engine thread waits here for work
  std::condition_variable idle_cv_;  // WaitIdle waits here
  std::deque<std::unique_ptr<Live>> inbox_;
  std::vector<std::function<void()>> tasks_;  // RunOnEngineThread's
  std::vector<uint64_t> cancels_;             // sequence ids
  bool reset_cache_ = false;
  absl::Status reset_result_;
  bool stop_ = false;
  absl::Status broken_;  // the backend's failure; every later request fails with it
  int64_t queued_ = 0;   // submitted and not yet drained
  absl::flat_hash_map<std::string, uint64_t> live_ids_;  // request id -> sequence id
  uint64_t next_seq_id_ = 1;
  EngineStats stats_;

  // Engine-thread state.
  absl::flat_hash_map<uint64_t, std::unique_ptr<Live>> live_;
  using ReservedMap = absl::flat_hash_map<std::string, std::unique_ptr<Reserved>>;
  ReservedMap reserved_;  // by transfer id
  int64_t reserved_pages_ = 0;
  EngineStats counters_;
  ForwardOutput out_;
  std::thread thread_;
};

// Pages for a KV cache of `bytes` (whole pages; at least 1).
int64_t KvPagesForBytes(const kvcache::PageLayout& layout, int64_t bytes);

}  // namespace baton::engine
