#include "engine/scheduler.h"

#include <algorithm>
#include <utility>

#include "common/check.h"
#include "common/strings.h"

namespace baton::engine {
namespace {

void InsertSorted(std::vector<Sequence*>* list, Sequence* seq,
                  bool (*before)(const Sequence*, const Sequence*)) {
  list->insert(std::upper_bound(list->begin(), list->end(), seq, before), seq);
}

void Erase(std::vector<Sequence*>* list, const Sequence* seq) {
  auto it = std::find(list->begin(), list->end(), seq);
  if (it != list->end()) list->erase(it);
}

}  // namespace

absl::Status ValidateSchedulerConfig(const SchedulerConfig& c) {
  auto bad = [](std::string_view field, int64_t value, std::string_view bound) {
    return absl::InvalidArgumentError(StrCat(field, " is ", value, "; it must be ", bound));
  };
  if (c.block_size < 1 || c.block_size > 1024)
    return bad("block_size", c.block_size, "in [1, 1024]");
  if (c.max_running < 1) return bad("max_running", c.max_running, ">= 1");
  if (c.max_waiting < 0) return bad("max_waiting", c.max_waiting, ">= 0");
  if (c.max_batched_tokens < c.max_running) {
    return bad("max_batched_tokens", c.max_batched_tokens,
               StrCat(">= max_running (", c.max_running, "), so every running decode fits a step"));
  }
  if (c.max_prefill_chunk < 1) return bad("max_prefill_chunk", c.max_prefill_chunk, ">= 1");
  if (c.max_model_len < 1) return bad("max_model_len", c.max_model_len, ">= 1");
  return absl::OkStatus();
}

Scheduler::Scheduler(const SchedulerConfig& config, kvcache::BlockManager* blocks)
    : config_(config), blocks_(blocks) {}

bool Scheduler::Before(const Sequence* a, const Sequence* b) {
  if (a->priority != b->priority) return a->priority < b->priority;
  return a->arrival < b->arrival;
}

absl::Status QueueFullError(int64_t max_waiting) {
  return absl::ResourceExhaustedError(StrCat("the queue is full (", max_waiting,
                                             " waiting requests, the max_waiting limit); retry "
                                             "later"));
}

absl::Status Scheduler::CheckFits(int64_t prompt_len, int64_t max_len) const {
  if (prompt_len < 1 || max_len <= prompt_len) {
    return absl::InvalidArgumentError(
        StrCat("a sequence needs at least one prompt token and room for one more; it has ",
               prompt_len, " prompt tokens and may reach ", max_len));
  }
  if (max_len > config_.max_model_len) {
    return absl::InvalidArgumentError(
        StrCat("prompt plus max_tokens is ", max_len, " tokens, more than max_model_len (",
               config_.max_model_len, "); lower max_tokens or shorten the prompt"));
  }
  const int64_t pages = BlocksFor(max_len);
  if (pages > blocks_->num_blocks()) {
    return absl::InvalidArgumentError(
        StrCat("prompt plus max_tokens is ", max_len, " tokens, which needs ", pages,
               " KV pages of ", config_.block_size, " tokens, but the KV cache has only ",
               blocks_->num_blocks(), " pages; lower max_tokens or give the KV cache more memory"));
  }
  return absl::OkStatus();
}

absl::Status Scheduler::Add(std::unique_ptr<Sequence> seq) {
  BATON_CHECK(seq != nullptr && !all_.contains(seq->id));
  if (absl::Status fits = CheckFits(seq->prompt_len, seq->max_len); !fits.ok()) return fits;
  if (num_waiting() >= config_.max_waiting) return QueueFullError(config_.max_waiting);
  seq->arrival = next_arrival_++;
  seq->state = SequenceState::kWaiting;
  Sequence* raw = seq.get();
  all_.emplace(seq->id, std::move(seq));
  InsertSorted(&waiting_, raw, &Before);
  return absl::OkStatus();
}

void Scheduler::ExtendHashes(Sequence* seq) {
  const size_t full = seq->tokens.size() / config_.block_size;
  while (seq->block_hashes.size() < full) {
    const size_t i = seq->block_hashes.size();
    const kvcache::BlockHash& parent = i == 0 ? seq->root : seq->block_hashes[i - 1];
    seq->block_hashes.push_back(kvcache::ChainBlockHash(
        parent, std::span(seq->tokens).subspan(i * config_.block_size, config_.block_size)));
  }
}

bool Scheduler::Grow(Sequence* seq, int64_t tokens) {
  const int64_t need = BlocksFor(tokens) - static_cast<int64_t>(seq->block_table.size());
  if (need <= 0) return true;
  if (need > blocks_->num_available()) return false;
  for (int64_t i = 0; i < need; ++i) {
    absl::StatusOr<int32_t> b = blocks_->Allocate();
    BATON_CHECK(b.ok());
    seq->block_table.push_back(*b);
  }
  return true;
}

void Scheduler::ReleasePages(Sequence* seq) {
  for (auto it = seq->block_table.rbegin(); it != seq->block_table.rend(); ++it) {
    blocks_->Release(*it);
  }
  seq->block_table.clear();
  seq->num_computed = 0;
  seq->num_stored = 0;
  seq->kv_ready = false;
}

void Scheduler::Preempt(Sequence* seq, StepPlan* plan, int64_t* budget) {
  auto it = std::find_if(plan->items.begin(), plan->items.end(),
                         [&](const StepItem& item) { return item.seq == seq; });
  if (it != plan->items.end()) {
    *budget += it->num_tokens;
    plan->num_tokens -= it->num_tokens;
    plan->items.erase(it);
  }
  ReleasePages(seq);
  Erase(&running_, seq);
  seq->state = SequenceState::kWaiting;
  ++seq->num_preemptions;
  ++num_preemptions_;
  InsertSorted(&waiting_, seq, &Before);
  plan->preempted.push_back(seq->id);
}

bool Scheduler::TryAdmit(Sequence* seq, int64_t budget, StepPlan* plan) {
  ExtendHashes(seq);
  const int64_t bs = config_.block_size;
  const int64_t len = static_cast<int64_t>(seq->tokens.size());
  if (seq->kv_ready) {
    // Its pages came with it; it needs room only for what follows the received prompt.
    const int64_t n = std::min({len - seq->num_computed, config_.max_prefill_chunk, budget});
    if (!Grow(seq, seq->num_computed + n)) return false;
    seq->admitted_once = true;
    Erase(&waiting_, seq);
    seq->state = SequenceState::kRunning;
    InsertSorted(&running_, seq, &Before);
    plan->items.push_back(StepItem{seq, seq->num_computed, n, seq->num_computed + n == len});
    plan->num_tokens += n;
    return true;
  }
  // At least the last token is computed, for its logits.
  const int64_t hit = std::min(blocks_->CountCachedPrefix(seq->block_hashes), (len - 1) / bs);
  const int64_t hit_tokens = hit * bs;
  const int64_t n = std::min({len - hit_tokens, config_.max_prefill_chunk, budget});
  const int64_t need = BlocksFor(hit_tokens + n) - hit;
  if (need > blocks_->num_available() - blocks_->CountIdle(seq->block_hashes, hit)) return false;

  seq->block_table = blocks_->AcquireCached(seq->block_hashes, hit);
  BATON_CHECK(Grow(seq, hit_tokens + n));
  seq->num_computed = hit_tokens;
  seq->num_stored = hit;
  if (!seq->admitted_once) {
    seq->admitted_once = true;
    seq->cached_prompt_tokens = hit_tokens;
    blocks_->CountLookup(seq->prompt_len, hit_tokens);
  }
  Erase(&waiting_, seq);
  seq->state = SequenceState::kRunning;
  InsertSorted(&running_, seq, &Before);
  plan->items.push_back(StepItem{seq, hit_tokens, n, hit_tokens + n == len});
  plan->num_tokens += n;
  return true;
}

StepPlan Scheduler::Schedule() {
  StepPlan plan;
  int64_t budget = config_.max_batched_tokens;
  // Decodes first, then prompts still being prefilled: two passes over a copy, since
  // preemption edits running_.
  for (const bool decodes : {true, false}) {
    const std::vector<Sequence*> order = running_;
    for (Sequence* seq : order) {
      if (seq->state != SequenceState::kRunning) continue;  // preempted in this pass
      const int64_t remaining = static_cast<int64_t>(seq->tokens.size()) - seq->num_computed;
      BATON_CHECK(remaining >= 1);
      if ((remaining == 1) != decodes) continue;
      const int64_t n = std::min({remaining, config_.max_prefill_chunk, budget});
      if (n <= 0) continue;
      bool keep = true;
      while (!Grow(seq, seq->num_computed + n)) {
        Sequence* victim = running_.back();
        Preempt(victim, &plan, &budget);
        if (victim == seq) {
          keep = false;
          break;
        }
      }
      if (!keep) continue;
      plan.items.push_back(
          StepItem{seq, seq->num_computed, n,
                   seq->num_computed + n == static_cast<int64_t>(seq->tokens.size())});
      plan.num_tokens += n;
      budget -= n;
    }
  }
  // New work only when nothing had to give way in this step.
  if (plan.preempted.empty()) {
    while (!waiting_.empty() && budget > 0 && num_running() < config_.max_running) {
      if (!TryAdmit(waiting_.front(), budget, &plan)) break;
      budget = config_.max_batched_tokens - plan.num_tokens;
    }
  }
  return plan;
}

void Scheduler::Commit(const StepPlan& plan, const std::vector<std::optional<int32_t>>& sampled) {
  BATON_CHECK(sampled.size() == plan.items.size());
  const int64_t bs = config_.block_size;
  for (size_t i = 0; i < plan.items.size(); ++i) {
    Sequence* seq = plan.items[i].seq;
    BATON_CHECK(seq->num_computed == plan.items[i].start);
    seq->num_computed += plan.items[i].num_tokens;
    ExtendHashes(seq);
    const int64_t full =
        std::min<int64_t>(seq->num_computed / bs, static_cast<int64_t>(seq->block_hashes.size()));
    for (int64_t b = seq->num_stored; b < full; ++b) {
      blocks_->Store(seq->block_table[b], seq->block_hashes[b],
                     b == 0 ? seq->root : seq->block_hashes[b - 1],
                     std::span(seq->tokens).subspan(b * bs, bs));
    }
    seq->num_stored = std::max(seq->num_stored, full);
    if (sampled[i]) {
      BATON_CHECK(plan.items[i].wants_logits);
      seq->tokens.push_back(*sampled[i]);
    }
  }
  blocks_->Flush();
}

std::unique_ptr<Sequence> Scheduler::Finish(uint64_t id) {
  auto it = all_.find(id);
  if (it == all_.end()) return nullptr;
  std::unique_ptr<Sequence> seq = std::move(it->second);
  all_.erase(it);
  Erase(&running_, seq.get());
  Erase(&waiting_, seq.get());
  ReleasePages(seq.get());
  seq->state = SequenceState::kFinished;
  blocks_->Flush();
  return seq;
}

Sequence* Scheduler::Find(uint64_t id) const {
  auto it = all_.find(id);
  return it == all_.end() ? nullptr : it->second.get();
}

std::vector<uint64_t> Scheduler::running_ids() const {
  std::vector<uint64_t> ids;
  for (const Sequence* s : running_) ids.push_back(s->id);
  return ids;
}

std::vector<uint64_t> Scheduler::waiting_ids() const {
  std::vector<uint64_t> ids;
  for (const Sequence* s : waiting_) ids.push_back(s->id);
  return ids;
}

}  // namespace baton::engine
