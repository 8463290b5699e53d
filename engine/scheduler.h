// The continuous-batching scheduler: which sequences run in the next step, and how many
// of their tokens. Pure bookkeeping over a BlockManager; the engine thread drives it:
//
//   StepPlan plan = scheduler.Schedule();
//   ... run plan.items through the model, sample where item.wants_logits ...
//   scheduler.Commit(plan, sampled);   // per item: the new token, or nothing
//
// Policy (docs/scheduler.md):
//   - Each step spends at most max_batched_tokens. Running decodes are served first, one
//     token each; prefill chunks get what is left (at most max_prefill_chunk per
//     sequence), so a long prompt never stalls running decodes.
//   - Order is (priority, arrival): a lower priority value goes first, as in vLLM; ties
//     are first come, first served. Waiting sequences are admitted in that order while
//     their pages fit and fewer than max_running run; the head of the queue is never
//     overtaken.
//   - When a running sequence needs a page and none is left, the running sequence that
//     comes last in that order is preempted: its pages are released and it waits to be
//     recomputed (its generated tokens are kept).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "kvcache/block_hash.h"
#include "kvcache/block_manager.h"

namespace baton::engine {

struct SchedulerConfig {
  int64_t block_size = 16;
  int64_t max_running = 256;          // sequences in the running batch
  int64_t max_waiting = 4096;         // queue length; more is an overload error
  int64_t max_batched_tokens = 2048;  // tokens per step
  int64_t max_prefill_chunk = 512;    // prompt tokens per sequence per step
  int64_t max_model_len = 0;          // prompt + output tokens per sequence
};

// The overload error for a full queue (RESOURCE_EXHAUSTED, naming max_waiting).
absl::Status QueueFullError(int64_t max_waiting);

// InvalidArgument naming the field, for a config the scheduler cannot work with.
absl::Status ValidateSchedulerConfig(const SchedulerConfig& config);

enum class SequenceState { kWaiting, kRunning, kFinished };

struct Sequence {
  uint64_t id = 0;
  int priority = 0;
  uint64_t arrival = 0;         // admission order, assigned by Add
  kvcache::BlockHash root;      // the namespace hash its block chain starts from
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int64_t prompt_len = 0;
  int64_t max_len = 0;  // tokens it may reach: prompt + max new tokens

  SequenceState state = SequenceState::kWaiting;
  int64_t num_computed = 0;                      // tokens whose K/V are in its pages
  std::vector<int32_t> block_table;              // pages, in position order
  std::vector<kvcache::BlockHash> block_hashes;  // of its full blocks so far, in order
  int64_t num_stored = 0;                        // blocks offered to the prefix cache
  int64_t cached_prompt_tokens = 0;              // prompt tokens found cached at first admission
  int num_preemptions = 0;
  bool admitted_once = false;
  // The prompt's K/V arrived in block_table's pages from another worker (its K/V for
  // positions [0, num_computed) is there): admission takes no prefix lookup and computes
  // only what follows. Cleared when the pages are released (a preempted sequence
  // recomputes its prompt like any other).
  bool kv_ready = false;
};

struct StepItem {
  Sequence* seq = nullptr;
  int64_t start = 0;          // first token position computed in this step
  int64_t num_tokens = 0;     // tokens computed in this step
  bool wants_logits = false;  // true when this step reaches the sequence's last token
};

struct StepPlan {
  std::vector<StepItem> items;      // decodes first, then prefill chunks
  std::vector<uint64_t> preempted;  // ids preempted while planning this step
  int64_t num_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, kvcache::BlockManager* blocks);

  // Queues a sequence. ResourceExhausted (overload) when the queue is full;
  // InvalidArgument when max_len exceeds max_model_len or it could never fit the page
  // pool even alone. On error nothing is kept.
  absl::Status Add(std::unique_ptr<Sequence> seq);

  // Add's checks that do not depend on the queue: InvalidArgument when the sequence
  // exceeds max_model_len or could never fit the page pool alone. Reads only what is
  // fixed at construction, so any thread may call it.
  absl::Status CheckFits(int64_t prompt_len, int64_t max_len) const;

  StepPlan Schedule();

  // Applies a planned step: each item's tokens are now computed; `sampled[i]` is the
  // token sampled for items[i] when it wanted logits. Full blocks go to the prefix cache.
  void Commit(const StepPlan& plan, const std::vector<std::optional<int32_t>>& sampled);

  // Ends a sequence (finished, cancelled or failed): releases its pages at once and
  // forgets it. Returns it so the caller can read its final state, or null if unknown.
  std::unique_ptr<Sequence> Finish(uint64_t id);

  Sequence* Find(uint64_t id) const;
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  std::vector<uint64_t> running_ids() const;  // in priority order
  std::vector<uint64_t> waiting_ids() const;  // in the order they would be admitted
  const SchedulerConfig& config() const { return config_; }
  int64_t BlocksFor(int64_t tokens) const {
    return (tokens + config_.block_size - 1) / config_.block_size;
  }

 private:
  static bool Before(const Sequence* a, const Sequence* b);
  bool Grow(Sequence* seq, int64_t tokens);  // pages for `tokens` positions, or false
  void Preempt(Sequence* seq, StepPlan* plan, int64_t* budget);
  bool TryAdmit(Sequence* seq, int64_t budget, StepPlan* plan);
  void ReleasePages(Sequence* seq);
  void ExtendHashes(Sequence* seq);

  SchedulerConfig config_;
  kvcache::BlockManager* blocks_;
  uint64_t next_arrival_ = 0;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Sequence>> all_;
  std::vector<Sequence*> running_;  // kept sorted by Before
  std::vector<Sequence*> waiting_;  // kept sorted by Before
  int64_t num_preemptions_ = 0;
};

}  // namespace baton::engine
