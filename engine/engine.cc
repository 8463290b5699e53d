#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <future>
#include <utility>

#include "common/check.h"
#include "common/status.h"
#include "common/strings.h"
#include "tokenizer/text_stream.h"

namespace baton::engine {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// MemAvailable from /proc/meminfo, in bytes; 0 when unknown.
int64_t MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

}  // namespace

struct Engine::Live {
  std::string id;
  uint64_t seq_id = 0;
  std::shared_ptr<RequestStream> stream;
  SamplingParams params;
  bool detokenize = true;
  std::unique_ptr<Sequence> seq;  // until handed to the scheduler
  std::unique_ptr<SequenceSampler> sampler;
  std::unique_ptr<StopChecker> stop;
  std::unique_ptr<tokenizer::TextStream> text;  // when detokenize
  Clock::time_point arrival, first_scheduled, first_token;
  bool scheduled = false;
  int64_t generated = 0;  // output tokens, the resumed ones included
  int64_t resumed = 0;    // EngineRequest::output_ids
  uint64_t seed = 0;
  std::shared_ptr<kvcache::KvSink> sink;
  std::string kv_transfer_id;
  std::shared_ptr<const grammar::TokenGrammar> grammar;  // constrained decoding; else null
  // EngineRequest::trace: the steps not yet handed out, how many were recorded, and the
  // logprobs the client asked for (params.logprobs is raised for the trace's alternatives).
  bool trace = false;
  std::vector<StepTrace> trace_steps;
  size_t traced = 0;
  bool trace_truncated = false;
  int client_logprobs = -1;
};

struct Engine::Reserved {
  std::vector<int32_t> prompt;
  int64_t cached_blocks = 0;
  std::vector<int32_t> pages;  // every block's page: the cached ones, then the reserved
  bool complete = false;
  SampledToken first;
  int64_t cached_tokens = 0;  // the prefill worker's prefix-cache hit
};

bool RequestStream::Next(TokenEvent* out) {
  bool timed_out = false;
  return NextFor(out, -1, &timed_out);
}

bool RequestStream::NextFor(TokenEvent* out, int64_t timeout_ms, bool* timed_out) {
  std::unique_lock<std::mutex> lock(mu_);
  *timed_out = false;
  auto ready = [&] { return done_ || !events_.empty(); };
  if (timeout_ms < 0) {
    cv_.wait(lock, ready);
  } else if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready)) {
    *timed_out = true;
    return false;
  }
  if (events_.empty()) return false;
  *out = std::move(events_.front());
  events_.pop_front();
  if (out->finished) done_ = true;
  return true;
}

size_t RequestStream::TakeAll(std::vector<TokenEvent>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t taken = 0;
  while (!events_.empty() && !done_) {
    out->push_back(std::move(events_.front()));
    events_.pop_front();
    if (out->back().finished) done_ = true;
    ++taken;
  }
  return taken;
}

void RequestStream::SetListener(std::function<void()> on_event) {
  std::lock_guard<std::mutex> listener_lock(listener_mu_);
  listener_ = std::move(on_event);
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued = !events_.empty();
  }
  if (listener_ && queued) listener_();
}

void RequestStream::Push(TokenEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
  std::lock_guard<std::mutex> listener_lock(listener_mu_);
  if (listener_) listener_();
}

int64_t KvPagesForBytes(const kvcache::PageLayout& layout, int64_t bytes) {
  return std::max<int64_t>(1, bytes / layout.page_bytes());
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const LoadedModel* model,
                                                       const EngineOptions& options) {
  const model::ModelConfig& config = model->model->config();
  SchedulerConfig sc;
  sc.block_size = options.block_size;
  sc.max_running = options.max_running;
  sc.max_waiting = options.max_waiting;
  sc.max_batched_tokens = options.max_batched_tokens;
  sc.max_prefill_chunk = options.max_prefill_chunk;
  sc.max_model_len = config.max_position_embeddings;
  if (options.max_model_len > config.max_position_embeddings || options.max_model_len < 0) {
    return absl::InvalidArgumentError(StrCat(
        "--max-model-len is ", options.max_model_len, "; the model's context is ",
        config.max_position_embeddings, " tokens (max_position_embeddings): give at most that"));
  }
  if (options.max_model_len > 0) sc.max_model_len = options.max_model_len;
  BATON_RETURN_IF_ERROR(ValidateSchedulerConfig(sc));
  if (options.threads < 0) {
    return absl::InvalidArgumentError(StrCat("threads is ", options.threads, "; it must be >= 0"));
  }
  BATON_RETURN_IF_ERROR(kvcache::CheckKvCacheDtype(options.kv_cache_dtype));
  const kvcache::PageLayout layout =
      options.shard
          ? PageLayoutFor(*options.shard, config, options.block_size, options.kv_cache_dtype)
          : PageLayoutFor(config, options.block_size, options.kv_cache_dtype);
  int64_t bytes = options.kv_cache_bytes;
  if (bytes <= 0) {
    if (!(options.kv_cache_fraction > 0 && options.kv_cache_fraction <= 0.95)) {
      return absl::InvalidArgumentError(
          StrCat("kv_cache_fraction is ", options.kv_cache_fraction, "; it must be in (0, 0.95]"));
    }
    const int64_t available = MemAvailableBytes();
    if (available <= 0) {
      return absl::FailedPreconditionError(
          "cannot read MemAvailable from /proc/meminfo; give the KV cache size in bytes");
    }
    bytes = static_cast<int64_t>(options.kv_cache_fraction * static_cast<double>(available));
  }
  if (bytes < layout.page_bytes()) {
    return absl::InvalidArgumentError(StrCat(
        "the KV cache budget is ", bytes, " bytes, less than one page of ", options.block_size,
        " tokens (", layout.page_bytes(), " bytes for this model); give it more memory"));
  }
  std::unique_ptr<Engine> engine(new Engine(model, options));
  const int64_t pages = KvPagesForBytes(layout, bytes);
  void* memory = nullptr;
  if (options.kv_pool_memory) {
    BATON_ASSIGN_OR_RETURN(memory,
                           options.kv_pool_memory(static_cast<size_t>(pages) *
                                                  static_cast<size_t>(layout.page_bytes())));
  }
  BATON_ASSIGN_OR_RETURN(engine->pool_, kvcache::KvPool::Create(layout, pages, memory));
  engine->threads_ = std::make_unique<ThreadPool>(options.threads);
  engine->events_ = std::make_unique<kvcache::KvEventPublisher>(options.block_size);
  engine->blocks_ = std::make_unique<kvcache::BlockManager>(
      engine->pool_->num_blocks(), options.enable_prefix_cache, engine->events_.get());
  engine->scheduler_ = std::make_unique<Scheduler>(sc, engine->blocks_.get());
  if (options.backend) {
    BATON_ASSIGN_OR_RETURN(engine->runner_,
                           options.backend(engine->pool_.get(), engine->threads_.get()));
  } else {
    engine->runner_ =
        std::make_unique<ModelRunner>(*model->model, engine->pool_.get(), engine->threads_.get());
  }
  engine->PublishStatsLocked();
  engine->thread_ = std::thread([e = engine.get()] { e->Loop(); });
  return engine;
}

Engine::Engine(const LoadedModel* model, const EngineOptions& options)
    : model_(model), options_(options) {
  if (options_.model_id.empty()) options_.model_id = model->name;
  sampleable_vocab_ = SampleableVocab(*model);
  grammars_ = std::make_unique<GrammarCache>(model->tokenizer.tokenizer);
}

absl::Status Engine::ConstrainSampler(Live* live, std::span<const int32_t> output_ids) const {
  if (live->grammar == nullptr) return absl::OkStatus();
  // What ends the sequence: the stop ids and EOS, even with ignore_eos: a complete
  // document can only be followed by an end, which ignore_eos then repeats until
  // max_tokens (vLLM does the same).
  std::vector<int32_t> end_ids = live->params.stop_token_ids;
  end_ids.insert(end_ids.end(), model_->eos_token_ids.begin(), model_->eos_token_ids.end());
  return live->sampler->Constrain(live->grammar, std::move(end_ids), output_ids);
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // The engine thread is gone: end whatever is left. Tasks queued before the stop still
  // get their answer (the state is consistent; nothing else runs now).
  for (auto& task : tasks_) task();
  tasks_.clear();
  for (auto& live : inbox_) {
    TokenEvent e;
    e.finished = true;
    e.status = absl::CancelledError("the engine shut down");
    live->stream->Push(std::move(e));
  }
  std::vector<uint64_t> ids;
  for (auto& [id, live] : live_) ids.push_back(id);
  for (uint64_t id : ids) {
    TokenEvent e;
    e.status = absl::CancelledError("the engine shut down");
    End(id, std::move(e));
  }
}

absl::StatusOr<std::shared_ptr<RequestStream>> Engine::Submit(EngineRequest request) {
  const model::ModelConfig& config = model_->model->config();
  BATON_RETURN_IF_ERROR(
      ValidateSamplingParams(request.params, config.vocab_size, options_.sampling_limits));
  BATON_RETURN_IF_ERROR(CheckPrompt(request.prompt_ids));
  if (request.kv_sink != nullptr && !request.kv_transfer_id.empty()) {
    return absl::InvalidArgumentError(
        "a request cannot both send its prompt's KV (kv_sink) and receive it (kv_transfer_id)");
  }
  const int64_t prompt_len = static_cast<int64_t>(request.prompt_ids.size());
  const int64_t context = config.max_position_embeddings;
  const int64_t max_len = prompt_len + std::min(request.params.max_tokens, context - prompt_len);
  BATON_RETURN_IF_ERROR(CheckOutputIds(request, max_len - prompt_len));
  BATON_RETURN_IF_ERROR(scheduler_->CheckFits(prompt_len, max_len));

  auto live = std::make_unique<Live>();
  live->arrival = Clock::now();
  live->trace = request.trace;
  live->client_logprobs = request.params.logprobs;
  if (request.trace) request.params.logprobs = std::max(request.params.logprobs, kTraceTopLogprobs);
  live->params = request.params;
  live->detokenize = request.detokenize;
  auto seq = std::make_unique<Sequence>();
  seq->priority = request.priority;
  seq->root =
      kvcache::NamespaceHash({options_.model_id, "", request.cache_salt}, options_.block_size);
  seq->prompt_len = prompt_len;
  seq->max_len = max_len;
  live->seed = request.params.seed.value_or(RandomSeed());
  live->sink = std::move(request.kv_sink);
  live->kv_transfer_id = std::move(request.kv_transfer_id);
  live->sampler = std::make_unique<SequenceSampler>(request.params, request.prompt_ids, live->seed,
                                                    request.output_ids);
  live->sampler->set_vocab_limit(sampleable_vocab_);
  BATON_ASSIGN_OR_RETURN(live->grammar, grammars_->Get(request.params.constraint));
  BATON_RETURN_IF_ERROR(ConstrainSampler(live.get(), request.output_ids));
  live->stop =
      std::make_unique<StopChecker>(request.params, model_->eos_token_ids, context - prompt_len);
  if (request.detokenize) {
    live->text =
        std::make_unique<tokenizer::TextStream>(model_->tokenizer.tokenizer, request.params.stop,
                                                request.params.include_stop_str_in_output);
    // Their text was delivered before; the stream's state (partial characters, stop
    // strings spanning the boundary) goes on from them.
    for (int32_t t : request.output_ids) (void)live->text->Add(t);
  }
  live->generated = live->resumed = static_cast<int64_t>(request.output_ids.size());
  seq->tokens = std::move(request.prompt_ids);
  // A resumed sequence is, to the scheduler, one preempted after generating them: its
  // prompt and outputs are computed, then it samples the next token.
  seq->tokens.insert(seq->tokens.end(), request.output_ids.begin(), request.output_ids.end());

  std::shared_ptr<RequestStream> stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return absl::UnavailableError("the engine is shutting down");
    if (!broken_.ok()) return broken_;
    if (stats_.waiting + queued_ >= options_.max_waiting) {
      return QueueFullError(options_.max_waiting);
    }
    seq->id = next_seq_id_++;
    if (request.id.empty()) request.id = StrCat("req-", seq->id);
    if (live_ids_.contains(request.id)) {
      return absl::AlreadyExistsError(
          StrCat("request id '", request.id, "' is already in use; ids must be unique"));
    }
    live_ids_.emplace(request.id, seq->id);
    live->id = request.id;
    live->seq_id = seq->id;
    stream = std::make_shared<RequestStream>(request.id);
    live->stream = stream;
    live->seq = std::move(seq);
    inbox_.push_back(std::move(live));
    ++queued_;
  }
  wake_.notify_all();
  return stream;
}

absl::Status Engine::CheckOutputIds(const EngineRequest& request, int64_t max_output) const {
  if (request.output_ids.empty()) return absl::OkStatus();
  const int32_t vocab = model_->model->config().vocab_size;
  if (!request.kv_transfer_id.empty() || request.kv_sink != nullptr) {
    return absl::InvalidArgumentError(
        "output_ids (a resumed sequence) cannot be combined with a KV transfer");
  }
  if (static_cast<int64_t>(request.output_ids.size()) >= max_output) {
    return absl::InvalidArgumentError(StrCat(
        "output_ids holds ", request.output_ids.size(),
        " tokens, which leaves none to generate: max_tokens (or the context) allows ", max_output));
  }
  for (size_t i = 0; i < request.output_ids.size(); ++i) {
    const int32_t t = request.output_ids[i];
    if (t < 0 || t >= vocab) {
      return absl::InvalidArgumentError(
          StrCat("output_ids[", i, "] is ", t, ", outside the vocabulary [0, ", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status Engine::CheckPrompt(std::span<const int32_t> prompt_ids) const {
  const model::ModelConfig& config = model_->model->config();
  const int64_t prompt_len = static_cast<int64_t>(prompt_ids.size());
  if (prompt_len == 0) {
    return absl::InvalidArgumentError("the prompt is empty: give at least one token");
  }
  for (size_t i = 0; i < prompt_ids.size(); ++i) {
    const int32_t t = prompt_ids[i];
    if (t < 0 || t >= config.vocab_size) {
      return absl::InvalidArgumentError(StrCat(
          "prompt token ", i, " is ", t, ", outside the vocabulary [0, ", config.vocab_size, ")"));
    }
  }
  const int64_t context = config.max_position_embeddings;
  if (prompt_len >= context) {
    return absl::InvalidArgumentError(StrCat(
        "This model's maximum context length is ", context, " tokens. However, your prompt has ",
        prompt_len, " tokens, which leaves no room to generate. Shorten the prompt."));
  }
  return absl::OkStatus();
}

std::vector<kvcache::BlockHash> Engine::PromptBlockHashes(std::span<const int32_t> prompt_ids,
                                                          const std::string& cache_salt) const {
  const int64_t bs = options_.block_size;
  std::vector<kvcache::BlockHash> hashes;
  kvcache::BlockHash parent = kvcache::NamespaceHash({options_.model_id, "", cache_salt}, bs);
  for (int64_t b = 0; (b + 1) * bs <= static_cast<int64_t>(prompt_ids.size()); ++b) {
    parent = kvcache::ChainBlockHash(parent, prompt_ids.subspan(b * bs, bs));
    hashes.push_back(parent);
  }
  return hashes;
}

absl::Status Engine::health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

absl::Status Engine::RunOnEngineThread(std::function<absl::Status()> task) {
  std::promise<absl::Status> done;
  std::future<absl::Status> result = done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return absl::UnavailableError("the engine is shutting down");
    tasks_.push_back([&done, task = std::move(task)] { done.set_value(task()); });
  }
  wake_.notify_all();
  return result.get();
}

absl::StatusOr<KvReservation> Engine::ReserveKv(const std::string& transfer_id,
                                                std::vector<int32_t> prompt_ids,
                                                const std::string& cache_salt) {
  if (transfer_id.empty() || transfer_id.size() > 256) {
    return absl::InvalidArgumentError(
        StrCat("the transfer id has ", transfer_id.size(), " bytes; it must have 1 to 256"));
  }
  BATON_RETURN_IF_ERROR(CheckPrompt(prompt_ids));
  const int64_t prompt_len = static_cast<int64_t>(prompt_ids.size());
  BATON_RETURN_IF_ERROR(scheduler_->CheckFits(prompt_len, prompt_len + 1));
  std::vector<kvcache::BlockHash> hashes = PromptBlockHashes(prompt_ids, cache_salt);
  KvReservation out;
  absl::Status status = RunOnEngineThread([&]() -> absl::Status {
    if (reserved_.contains(transfer_id)) {
      return absl::AlreadyExistsError(
          StrCat("transfer id '", transfer_id, "' already holds a reservation"));
    }
    const int64_t blocks = scheduler_->BlocksFor(prompt_len);
    // The transfer contract always sends the last block (transport/transfer_ticket.h), so
    // a transfer is never empty: at most blocks - 1 come from the cache.
    const int64_t hit = std::min(blocks_->CountCachedPrefix(hashes), blocks - 1);
    const int64_t need = blocks - hit;
    const int64_t free = blocks_->num_available() - blocks_->CountIdle(hashes, hit);
    if (need > free) {
      return absl::ResourceExhaustedError(
          StrCat("the prompt needs ", need, " free KV pages and ", free,
                 " are free now; retry later or give the KV cache more memory"));
    }
    auto r = std::make_unique<Reserved>();
    r->prompt = std::move(prompt_ids);
    r->cached_blocks = hit;
    r->pages = blocks_->AcquireCached(hashes, hit);
    for (int64_t i = 0; i < need; ++i) {
      absl::StatusOr<int32_t> page = blocks_->Allocate();
      BATON_CHECK(page.ok());
      r->pages.push_back(*page);
    }
    blocks_->Flush();  // evictions
    out.cached_blocks = hit;
    out.cached_hashes.assign(hashes.begin(), hashes.begin() + hit);
    out.pages.assign(r->pages.begin() + hit, r->pages.end());
    reserved_pages_ += need;
    reserved_.emplace(transfer_id, std::move(r));
    std::lock_guard<std::mutex> lock(mu_);
    PublishStatsLocked();
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return out;
}

absl::Status Engine::CompleteKv(const std::string& transfer_id, SampledToken first,
                                int64_t cached_tokens) {
  if (first.id < 0 || first.id >= model_->model->config().vocab_size) {
    return absl::InvalidArgumentError(StrCat("the first token is ", first.id,
                                             ", outside the vocabulary [0, ",
                                             model_->model->config().vocab_size, ")"));
  }
  return RunOnEngineThread([&]() -> absl::Status {
    auto it = reserved_.find(transfer_id);
    if (it == reserved_.end()) {
      return absl::NotFoundError(StrCat("no KV reservation has transfer id '", transfer_id,
                                        "' (it expired or was released)"));
    }
    if (it->second->complete) {
      return absl::FailedPreconditionError(
          StrCat("the KV transfer '", transfer_id, "' was already completed"));
    }
    if (options_.kv_host_mirror != nullptr) {
      // The transfer wrote the host copy of the pages it filled (not those the prefix
      // cache held): now the device's.
      const Reserved& r = *it->second;
      BATON_RETURN_IF_ERROR(options_.kv_host_mirror->ToDevice(
          std::span(r.pages).subspan(static_cast<size_t>(r.cached_blocks))));
    }
    it->second->complete = true;
    it->second->first = std::move(first);
    it->second->cached_tokens =
        std::clamp<int64_t>(cached_tokens, 0, static_cast<int64_t>(it->second->prompt.size()));
    return absl::OkStatus();
  });
}

absl::Status Engine::ReleaseKv(const std::string& transfer_id) {
  return RunOnEngineThread([&]() -> absl::Status {
    auto it = reserved_.find(transfer_id);
    if (it == reserved_.end()) {
      return absl::NotFoundError(StrCat("no KV reservation has transfer id '", transfer_id, "'"));
    }
    DropReservation(it);
    std::lock_guard<std::mutex> lock(mu_);
    PublishStatsLocked();
    return absl::OkStatus();
  });
}

absl::Status Engine::Cancel(const std::string& id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_ids_.find(id);
    if (it == live_ids_.end()) {
      return absl::NotFoundError(StrCat("no running or queued request has id '", id, "'"));
    }
    cancels_.push_back(it->second);
  }
  wake_.notify_all();
  return absl::OkStatus();
}

absl::Status Engine::ResetPrefixCache() {
  std::unique_lock<std::mutex> lock(mu_);
  reset_cache_ = true;
  wake_.notify_all();
  idle_cv_.wait(lock, [&] { return !reset_cache_ || stop_; });
  if (reset_cache_) return absl::UnavailableError("the engine is shutting down");
  return reset_result_;
}

EngineStats Engine::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Engine::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] {
    return stop_ ||
           (queued_ == 0 && cancels_.empty() && stats_.running == 0 && stats_.waiting == 0);
  });
}

void Engine::Loop() {
  for (;;) {
    const bool has_work = scheduler_->num_running() + scheduler_->num_waiting() > 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] {
        return stop_ || has_work || !inbox_.empty() || !tasks_.empty() || !cancels_.empty() ||
               reset_cache_;
      });
      if (stop_) break;
    }
    DrainInbox();
    Step();
    if (has_work && options_.debug_step_delay.count() > 0) {
      std::this_thread::sleep_for(options_.debug_step_delay);
    }
    std::lock_guard<std::mutex> lock(mu_);
    PublishStatsLocked();
  }
  std::lock_guard<std::mutex> lock(mu_);
  idle_cv_.notify_all();
}

void Engine::DrainInbox() {
  std::deque<std::unique_ptr<Live>> inbox;
  std::vector<std::function<void()>> tasks;
  std::vector<uint64_t> cancels;
  bool reset = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox.swap(inbox_);
    tasks.swap(tasks_);
    cancels.swap(cancels_);
    reset = reset_cache_;
  }
  for (auto& task : tasks) task();
  const size_t drained = inbox.size();
  for (auto& live : inbox) {
    if (!live->kv_transfer_id.empty()) {
      AdmitTransferred(std::move(live));
      continue;
    }
    const uint64_t id = live->seq_id;
    absl::Status added = scheduler_->Add(std::move(live->seq));
    live_.emplace(id, std::move(live));
    if (!added.ok()) {
      TokenEvent e;
      e.status = added;
      End(id, std::move(e));
      ++counters_.requests_failed;
    }
  }
  if (drained > 0) {
    // Moved from the inbox to the scheduler's queue in one step, so that Submit's
    // queue-length check never sees them in neither place.
    std::lock_guard<std::mutex> lock(mu_);
    queued_ -= static_cast<int64_t>(drained);
    stats_.waiting = scheduler_->num_waiting();
  }
  for (uint64_t id : cancels) {
    if (!live_.contains(id)) continue;  // finished meanwhile
    TokenEvent e;
    e.status = absl::CancelledError("the request was cancelled");
    End(id, std::move(e));
    ++counters_.requests_cancelled;
  }
  if (reset) {
    absl::Status result = blocks_->ResetPrefixCache();
    blocks_->Flush();
    std::lock_guard<std::mutex> lock(mu_);
    reset_result_ = result;
    reset_cache_ = false;
    PublishStatsLocked();  // notifies
  }
}

void Engine::Step() {
  StepPlan plan = scheduler_->Schedule();
  {
    // Admissions shrink the queue now, not after the forward pass: Submit's length check
    // reads these counts.
    std::lock_guard<std::mutex> lock(mu_);
    PublishStatsLocked();
  }
  if (plan.items.empty()) {
    // Only reachable if a queued sequence can never be scheduled, which Submit's page
    // check rules out; fail it rather than spin.
    if (scheduler_->num_running() == 0 && scheduler_->num_waiting() > 0) {
      const uint64_t id = scheduler_->waiting_ids().front();
      TokenEvent e;
      e.status = absl::ResourceExhaustedError("the request does not fit the KV cache");
      End(id, std::move(e));
      ++counters_.requests_failed;
    }
    return;
  }
  const auto now = Clock::now();
  std::vector<SequenceInput> inputs;
  inputs.reserve(plan.items.size());
  int64_t step_tokens = 0;
  for (const StepItem& item : plan.items) {
    step_tokens += item.num_tokens;
    Sequence* seq = item.seq;
    Live* live = live_.at(seq->id).get();
    if (!live->scheduled) {
      live->scheduled = true;
      live->first_scheduled = now;
    }
    if (item.start < seq->prompt_len) {
      counters_.prompt_tokens_computed +=
          std::min(item.start + item.num_tokens, seq->prompt_len) - item.start;
    }
    inputs.push_back(SequenceInput{std::span(seq->tokens).subspan(item.start, item.num_tokens),
                                   item.start, seq->block_table,
                                   item.wants_logits ? LogitsWanted::kLast : LogitsWanted::kNone});
    // A backend that can choose greedy tokens itself (the GPU's) then returns the id alone.
    // Not in a padded vocabulary: the backend's choice would range over every row.
    inputs.back().greedy = item.wants_logits && live->sampler->GreedyFromRawLogits() &&
                           sampleable_vocab_ == model_->model->config().vocab_size;
  }
  ++counters_.steps;
  if (options_.on_step) options_.on_step(step_tokens);
  // Prefill-role sequences hand each layer's K/V to their sinks as it lands.
  std::vector<kvcache::KvSink*> sinks(plan.items.size(), nullptr);
  bool any_sink = false;
  for (size_t i = 0; i < plan.items.size(); ++i) {
    sinks[i] = live_.at(plan.items[i].seq->id)->sink.get();
    any_sink = any_sink || sinks[i] != nullptr;
    if (sinks[i] != nullptr) inputs[i].kv_push = sinks[i]->group_push();
  }
  StepClock clock;
  clock.start = now;
  clock.layer_done.resize(plan.items.size());
  clock.drain_seconds.assign(plan.items.size(), 0.0);
  std::vector<bool> traced_sink(plan.items.size(), false);
  for (size_t i = 0; i < plan.items.size(); ++i) {
    traced_sink[i] = sinks[i] != nullptr && live_.at(plan.items[i].seq->id)->trace;
  }
  if (any_sink) {
    runner_->set_layer_kv_hook([&](int64_t layer, std::span<const SequenceInput> batch) {
      for (size_t i = 0; i < batch.size(); ++i) {
        if (sinks[i] == nullptr) continue;
        sinks[i]->OnLayerWritten(layer, batch[i].block_table, batch[i].start_pos,
                                 static_cast<int64_t>(batch[i].tokens.size()));
        if (traced_sink[i]) clock.layer_done[i].push_back(Clock::now());
      }
    });
  }
  absl::Status ran = runner_->Forward(inputs, &out_);
  clock.forwarded = Clock::now();
  if (any_sink) runner_->set_layer_kv_hook(nullptr);
  if (!ran.ok()) {
    if (absl::IsUnavailable(ran) || absl::IsDeadlineExceeded(ran)) {
      // A worker group lost a rank: nothing can run any more. Every live request ends
      // with the error (the router reroutes those that have not streamed yet), and new
      // ones are refused with it.
      {
        std::lock_guard<std::mutex> lock(mu_);
        broken_ = absl::UnavailableError(ran.message());
      }
      std::vector<uint64_t> ids;
      for (const auto& [id, live] : live_) ids.push_back(id);
      for (uint64_t id : ids) {
        TokenEvent e;
        e.status = absl::UnavailableError(ran.message());
        End(id, std::move(e));
        ++counters_.requests_failed;
      }
      return;
    }
    // Inputs were checked at Submit, so this is a bug; the step's requests fail cleanly.
    for (const StepItem& item : plan.items) {
      TokenEvent e;
      e.status = absl::InternalError(StrCat("forward pass failed: ", ran.message()));
      End(item.seq->id, std::move(e));
      ++counters_.requests_failed;
    }
    return;
  }
  std::vector<std::optional<int32_t>> sampled(plan.items.size());
  std::vector<SampledToken> tokens(plan.items.size());
  for (size_t i = 0; i < plan.items.size(); ++i) {
    if (!plan.items[i].wants_logits) continue;
    Live* live = live_.at(plan.items[i].seq->id).get();
    if (!out_.greedy_ids.empty() && out_.greedy_ids[i] >= 0) {
      tokens[i].id = out_.greedy_ids[i];  // the backend's greedy choice (SequenceInput::greedy)
    } else {
      tokens[i] = live->sampler->Sample(out_.row(out_.first_row[i]));
    }
    live->sampler->Accept(tokens[i].id);
    sampled[i] = tokens[i].id;
  }
  clock.sampled = Clock::now();
  scheduler_->Commit(plan, sampled);

  // Nothing a sink posted may still be reading pages once this step is over: the next
  // Schedule may preempt and reuse them. A sink that failed fails its request.
  std::vector<bool> sink_failed(plan.items.size(), false);
  for (size_t i = 0; i < plan.items.size(); ++i) {
    if (sinks[i] == nullptr) continue;
    const auto drain_start = Clock::now();
    absl::Status drained = sinks[i]->Drain(plan.items[i].seq->block_table, sampled[i].has_value());
    clock.drain_seconds[i] = Seconds(drain_start, Clock::now());
    if (drained.ok()) continue;
    sink_failed[i] = true;
    TokenEvent e;
    e.status = std::move(drained);
    End(plan.items[i].seq->id, std::move(e));
    ++counters_.requests_failed;
  }

  RecordTrace(plan, tokens, sampled, sink_failed, clock);
  const auto after = Clock::now();
  for (size_t i = 0; i < plan.items.size(); ++i) {
    if (!sampled[i] || sink_failed[i]) continue;
    EmitToken(plan.items[i].seq->id, std::move(tokens[i]), after);
  }
}

void Engine::RecordTrace(const StepPlan& plan, std::span<const SampledToken> tokens,
                         std::span<const std::optional<int32_t>> sampled,
                         const std::vector<bool>& ended, const StepClock& clock) {
  const int64_t kv_per_token = kv_bytes_per_token();
  const int32_t batch_sequences = static_cast<int32_t>(plan.items.size());
  int32_t batch_tokens = 0;
  for (const StepItem& item : plan.items) batch_tokens += static_cast<int32_t>(item.num_tokens);
  for (size_t i = 0; i < plan.items.size(); ++i) {
    // An item whose sink failed has ended: End freed its Sequence, so item.seq dangles.
    if (ended[i]) continue;
    const StepItem& item = plan.items[i];
    auto it = live_.find(item.seq->id);
    if (it == live_.end() || !it->second->trace) continue;
    Live* live = it->second.get();
    if (live->traced >= kMaxTraceSteps) {
      live->trace_truncated = true;
      continue;
    }
    ++live->traced;
    StepTrace& t = live->trace_steps.emplace_back();
    t.start_seconds = Seconds(live->arrival, clock.start);
    t.forward_seconds = Seconds(clock.start, clock.forwarded);
    t.sample_seconds = Seconds(clock.forwarded, clock.sampled);
    t.kv_wait_seconds = clock.drain_seconds[i];
    t.batch_sequences = batch_sequences;
    t.batch_tokens = batch_tokens;
    t.tokens = static_cast<int32_t>(item.num_tokens);
    t.context_tokens = item.start + item.num_tokens;
    t.prefill = item.start < item.seq->prompt_len;
    t.kv_bytes = t.context_tokens * kv_per_token;
    if (sampled[i]) t.sampled = tokens[i];
    // Layer groups: the sink's view of the chunk, so that a reader sees the transfer start
    // while later layers still compute.
    const auto& layers = clock.layer_done[i];
    const int64_t n = static_cast<int64_t>(layers.size());
    if (n == 0) continue;
    const int64_t per_group = (n + kTraceLayerGroups - 1) / kTraceLayerGroups;
    for (int64_t first = 0; first < n; first += per_group) {
      const int64_t count = std::min(per_group, n - first);
      t.layer_groups.push_back({.first_layer = static_cast<int32_t>(first),
                                .layers = static_cast<int32_t>(count),
                                .done_seconds = Seconds(clock.start, layers[first + count - 1]),
                                .kv_bytes = item.num_tokens * kv_per_token * count / n});
    }
  }
}

void Engine::ReleasePages(std::span<const int32_t> pages) {
  // Last to first, so that the ends of cached prefixes are evicted before their starts.
  for (auto p = pages.rbegin(); p != pages.rend(); ++p) blocks_->Release(*p);
  blocks_->Flush();
}

void Engine::DropReservation(ReservedMap::iterator it) {
  const Reserved& r = *it->second;
  ReleasePages(r.pages);
  reserved_pages_ -= static_cast<int64_t>(r.pages.size()) - r.cached_blocks;
  reserved_.erase(it);
}

void Engine::AdmitTransferred(std::unique_ptr<Live> live) {
  const uint64_t id = live->seq_id;
  auto fail = [&](absl::Status status) {
    live_.emplace(id, std::move(live));
    TokenEvent e;
    e.status = std::move(status);
    End(id, std::move(e));
    ++counters_.requests_failed;
  };
  auto it = reserved_.find(live->kv_transfer_id);
  if (it == reserved_.end() || !it->second->complete) {
    return fail(absl::FailedPreconditionError(
        StrCat("no completed KV transfer has id '", live->kv_transfer_id,
               "': it was never completed, it expired, or another request claimed it")));
  }
  Reserved& r = *it->second;
  Sequence& seq = *live->seq;
  if (r.prompt != seq.tokens) {
    absl::Status refused = absl::InvalidArgumentError(
        StrCat("the prompt (", seq.tokens.size(), " tokens) is not the one KV transfer '",
               live->kv_transfer_id, "' carried (", r.prompt.size(), " tokens)"));
    // The claim took over the reservation's lease, so nothing else would free it.
    DropReservation(it);
    return fail(std::move(refused));
  }
  // The pages become the sequence's: from here the scheduler releases them.
  seq.block_table = std::move(r.pages);
  seq.num_computed = seq.prompt_len;
  seq.num_stored = r.cached_blocks;
  seq.cached_prompt_tokens = r.cached_tokens;
  seq.kv_ready = true;
  SampledToken first = std::move(r.first);
  reserved_pages_ -= static_cast<int64_t>(seq.block_table.size()) - r.cached_blocks;
  reserved_.erase(it);
  std::vector<int32_t> pages = seq.block_table;
  absl::Status added = scheduler_->Add(std::move(live->seq));
  if (!added.ok()) {
    ReleasePages(pages);
    return fail(added);
  }
  ++counters_.kv_transfers_admitted;
  Sequence* queued = scheduler_->Find(id);
  queued->tokens.push_back(first.id);
  live->sampler = std::make_unique<SequenceSampler>(
      live->params, std::span(queued->tokens).first(queued->prompt_len), live->seed,
      std::span(&first.id, 1));
  live->sampler->set_vocab_limit(sampleable_vocab_);
  if (absl::Status constrained = ConstrainSampler(live.get(), std::span(&first.id, 1));
      !constrained.ok()) {
    return fail(constrained);  // End takes the sequence (and its pages) from the scheduler
  }
  live->scheduled = true;
  live->first_scheduled = Clock::now();
  live_.emplace(id, std::move(live));
  EmitToken(id, std::move(first), Clock::now());
}

void Engine::EmitToken(uint64_t id, SampledToken sampled, Clock::time_point after) {
  {
    Live* live = live_.at(id).get();
    const Sequence* seq = scheduler_->Find(id);
    const int32_t token = sampled.id;
    ++counters_.generated_tokens;
    if (live->generated++ == live->resumed) live->first_token = after;
    TokenEvent e;
    e.token_ids.push_back(token);
    if (live->client_logprobs >= 0) {
      e.logprobs.push_back(std::move(sampled));
      std::vector<std::pair<int32_t, float>>& top = e.logprobs.back().top_logprobs;
      if (std::cmp_greater(top.size(), live->client_logprobs)) top.resize(live->client_logprobs);
    }
    TakeTrace(live, &e);
    const StopDecision decision = live->stop->Check(token, live->generated);
    bool finished = decision.reason != FinishReason::kNone;
    e.finish_reason = decision.reason;
    if (decision.stop_token_id) e.stop_reason = StrCat(*decision.stop_token_id);
    if (live->detokenize) {
      if (decision.emit_text) {
        absl::StatusOr<tokenizer::TextStream::Piece> piece = live->text->Add(token);
        if (!piece.ok()) {
          // The sampler draws only ids the tokenizer has (SampleableVocab): a bug.
          e.status = absl::InternalError(piece.status().message());
          finished = true;
        } else {
          e.text = std::move(piece->text);
          if (piece->stopped) {
            finished = true;
            e.finish_reason = FinishReason::kStop;
            e.stop_reason = std::move(piece->matched);
          }
        }
      }
      if (finished && e.status.ok() && !live->text->stopped()) {
        tokenizer::TextStream::Piece tail = live->text->Finish();
        e.text += tail.text;
        if (tail.stopped) {
          e.finish_reason = FinishReason::kStop;
          e.stop_reason = std::move(tail.matched);
        }
      }
    }
    if (finished) {
      ++counters_.requests_finished;
      End(id, std::move(e));
    } else {
      e.seconds_since_arrival = Seconds(live->arrival, after);
      if (live->generated == live->resumed + 1) {
        // A client that stops the request itself (a router matching stop strings) still
        // learns how much of the prompt the prefix cache served.
        e.usage.prompt_tokens = seq->prompt_len;
        e.usage.cached_tokens = seq->cached_prompt_tokens;
        e.timings.queue_seconds = Seconds(live->arrival, live->first_scheduled);
        e.timings.time_to_first_token_seconds = Seconds(live->arrival, live->first_token);
      }
      live->stream->Push(std::move(e));
    }
  }
}

void Engine::TakeTrace(Live* live, TokenEvent* e) {
  if (!live->trace) return;
  e->trace_steps.insert(e->trace_steps.end(), std::make_move_iterator(live->trace_steps.begin()),
                        std::make_move_iterator(live->trace_steps.end()));
  live->trace_steps.clear();
  e->trace_truncated = live->trace_truncated;
}

void Engine::End(uint64_t seq_id, TokenEvent last) {
  auto it = live_.find(seq_id);
  BATON_CHECK(it != live_.end());
  std::unique_ptr<Live> live = std::move(it->second);
  live_.erase(it);
  std::unique_ptr<Sequence> seq = scheduler_->Finish(seq_id);
  const auto now = Clock::now();
  last.finished = true;
  last.seconds_since_arrival = Seconds(live->arrival, now);
  if (seq != nullptr) {
    last.usage.prompt_tokens = seq->prompt_len;
    last.usage.cached_tokens = seq->cached_prompt_tokens;
    last.timings.num_preemptions = seq->num_preemptions;
  }
  last.usage.completion_tokens = live->generated;
  TakeTrace(live.get(), &last);
  if (live->scheduled) last.timings.queue_seconds = Seconds(live->arrival, live->first_scheduled);
  if (live->generated > live->resumed) {
    last.timings.time_to_first_token_seconds = Seconds(live->arrival, live->first_token);
  }
  last.timings.total_seconds = last.seconds_since_arrival;
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_ids_.erase(live->id);
  }
  if (options_.on_request_end) options_.on_request_end(last);
  live->stream->Push(std::move(last));
}

void Engine::PublishStatsLocked() {
  EngineStats s = counters_;
  s.running = scheduler_->num_running();
  s.waiting = scheduler_->num_waiting();
  s.pages_total = blocks_->num_blocks();
  s.pages_used = blocks_->num_in_use();
  s.pages_free = blocks_->num_available();
  s.pages_cached = blocks_->num_cached();
  s.prefix_queried_tokens = blocks_->counters().queried_tokens;
  s.prefix_hit_tokens = blocks_->counters().hit_tokens;
  s.prefix_hit_rate = s.prefix_queried_tokens > 0 ? static_cast<double>(s.prefix_hit_tokens) /
                                                        static_cast<double>(s.prefix_queried_tokens)
                                                  : 0.0;
  s.preemptions = scheduler_->num_preemptions();
  s.kv_reservations = static_cast<int64_t>(reserved_.size());
  s.kv_pages_reserved = reserved_pages_;
  stats_ = s;
  idle_cv_.notify_all();
}

}  // namespace baton::engine
