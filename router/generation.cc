#include "router/generation.h"

#include <cstdint>
#include <utility>

#include "absl/strings/numbers.h"
#include "common/strings.h"

namespace baton::router {
namespace {

namespace pb = ::baton::internal::v1;

enum Op : intptr_t { kStart = 0, kRead = 1, kFinish = 2 };

void* Tag(int index, Op op) {
  return reinterpret_cast<void*>((static_cast<intptr_t>(index + 1) << 2) | op);
}
int TagIndex(void* tag) { return static_cast<int>((reinterpret_cast<intptr_t>(tag) >> 2) - 1); }
Op TagOp(void* tag) { return static_cast<Op>(reinterpret_cast<intptr_t>(tag) & 3); }

}  // namespace

struct Generation::Choice {
  Choice(int i, std::shared_ptr<const tokenizer::Tokenizer> tok, const GenerationRequest& r)
      : index(i),
        detok(std::move(tok), tokenizer::DecodeOptions{r.skip_special_tokens}),
        stops(r.stop, r.include_stop_str_in_output) {}

  int index;
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientAsyncReader<pb::GenerateResponse>> reader;
  pb::GenerateResponse msg;
  grpc::Status status;
  tokenizer::IncrementalDetokenizer detok;
  tokenizer::StopStringMatcher stops;
  bool ended = false;      // its final delta was produced
  bool finishing = false;  // Finish was called on the reader
  bool done = false;       // Finish returned
  int64_t generated = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  double queue_seconds = 0;
  double time_to_first_token_seconds = 0;
};

Generation::Generation(WorkerClient* worker, std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
                       GenerationRequest request)
    : worker_(worker), tokenizer_(std::move(tokenizer)), request_(std::move(request)) {}

absl::StatusOr<std::unique_ptr<Generation>> Generation::Start(
    WorkerClient* worker, std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
    GenerationRequest request) {
  if (request.n < 1) return absl::InvalidArgumentError("'n' must be at least 1");
  if (request.params.stop_size() > 0) {
    return absl::InvalidArgumentError("stop strings belong in GenerationRequest::stop");
  }
  std::unique_ptr<Generation> g(new Generation(worker, std::move(tokenizer), std::move(request)));
  const GenerationRequest& r = g->request_;
  for (int i = 0; i < r.n; ++i) {
    auto c = std::make_unique<Choice>(i, g->tokenizer_, r);
    pb::GenerateRequest wire;
    wire.set_request_id(r.n == 1 ? r.request_id : StrCat(r.request_id, "-", i));
    wire.mutable_prompt_ids()->Add(r.prompt_ids.begin(), r.prompt_ids.end());
    *wire.mutable_params() = r.params;
    if (i > 0 && r.params.has_seed()) wire.mutable_params()->set_seed(r.params.seed() + i);
    wire.set_priority(r.priority);
    wire.set_cache_salt(r.cache_salt);
    wire.set_detokenize(false);
    if (r.deadline) c->ctx.set_deadline(*r.deadline);
    c->reader = worker->stub()->PrepareAsyncGenerate(&c->ctx, wire, &g->cq_);
    c->reader->StartCall(Tag(i, kStart));
    ++g->pending_ops_;
    g->choices_.push_back(std::move(c));
  }
  g->open_choices_ = r.n;
  return g;
}

Generation::~Generation() {
  CancelAll();
  Drain();
}

void Generation::Cancel() {
  {
    std::lock_guard<std::mutex> lock(cancel_mu_);
    cancelled_ = true;
  }
  CancelAll();
}

bool Generation::WasCancelled() {
  std::lock_guard<std::mutex> lock(cancel_mu_);
  return cancelled_;
}

void Generation::CancelAll() {
  std::lock_guard<std::mutex> lock(cancel_mu_);
  for (auto& c : choices_) c->ctx.TryCancel();
}

void Generation::Fail(absl::Status status) {
  if (status_.ok()) status_ = std::move(status);
  CancelAll();
}

void Generation::Drain() {
  // Every started operation must come back before the queue and the calls go away; a
  // reader gets Finish once no Read is outstanding on it.
  while (pending_ops_ > 0) {
    void* tag = nullptr;
    bool ok = false;
    if (!cq_.Next(&tag, &ok)) break;
    --pending_ops_;
    Choice& c = *choices_[TagIndex(tag)];
    if (TagOp(tag) == kFinish) {
      c.done = true;
    } else if (!c.finishing) {
      c.finishing = true;
      c.reader->Finish(&c.status, Tag(c.index, kFinish));
      ++pending_ops_;
    }
  }
  cq_.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq_.Next(&tag, &ok)) {
  }
}

bool Generation::Next(ChoiceDelta* out) {
  while (open_choices_ > 0 && status_.ok()) {
    void* tag = nullptr;
    bool ok = false;
    if (!cq_.Next(&tag, &ok)) {
      Fail(absl::InternalError("the router's completion queue shut down"));
      break;
    }
    --pending_ops_;
    Choice& c = *choices_[TagIndex(tag)];
    switch (TagOp(tag)) {
      case kStart:
      case kRead:
        if (TagOp(tag) == kRead && ok) {
          const bool has_delta = !c.ended && Process(c, c.msg, out);
          if (!status_.ok()) break;
          c.reader->Read(&c.msg, Tag(c.index, kRead));  // until the worker closes the stream
          ++pending_ops_;
          if (has_delta) return true;
          break;
        }
        if (TagOp(tag) == kStart && ok) {
          c.reader->Read(&c.msg, Tag(c.index, kRead));
          ++pending_ops_;
          break;
        }
        c.finishing = true;
        c.reader->Finish(&c.status, Tag(c.index, kFinish));
        ++pending_ops_;
        break;
      case kFinish:
        c.done = true;
        if (c.ended) break;
        if (WasCancelled()) {
          Fail(absl::CancelledError("the request was cancelled"));
        } else if (!c.status.ok()) {
          Fail(worker_->ToStatus(c.status));
        } else {
          Fail(absl::InternalError(StrCat("the worker at ", worker_->target(),
                                          " ended a stream without its final message")));
        }
        break;
    }
  }
  return false;
}

bool Generation::Process(Choice& c, const pb::GenerateResponse& msg, ChoiceDelta* out) {
  *out = ChoiceDelta();
  out->index = c.index;
  if (msg.has_usage() && msg.usage().prompt_tokens() > 0) {
    c.prompt_tokens = msg.usage().prompt_tokens();
    c.cached_tokens = msg.usage().cached_tokens();
    // Also on the first message, so a choice the router stops itself keeps them.
    c.queue_seconds = msg.timings().queue_seconds();
    c.time_to_first_token_seconds = msg.timings().time_to_first_token_seconds();
  }
  // The worker applies no stop strings, so a final "stop" message ends on the token that
  // stopped it (EOS or a stop id), which is never text.
  const bool ends_on_stop_token = msg.finished() && msg.finish_reason() == "stop";
  const int count = msg.token_ids_size();
  for (int k = 0; k < count && !c.ended; ++k) {
    const int32_t id = msg.token_ids(k);
    ++c.generated;
    out->token_ids.push_back(id);
    if (k < msg.logprobs_size()) {
      const pb::TokenLogprob& in = msg.logprobs(k);
      TokenLogprob lp;
      lp.token_id = in.token_id();
      lp.logprob = in.logprob();
      if (tokenizer_->IsValid(lp.token_id)) lp.token = tokenizer_->TokenBytes(lp.token_id);
      for (const pb::TopLogprob& t : in.top()) {
        TopLogprob top{t.token_id(), "", t.logprob()};
        if (tokenizer_->IsValid(top.token_id)) top.token = tokenizer_->TokenBytes(top.token_id);
        lp.top.push_back(std::move(top));
      }
      out->logprobs.push_back(std::move(lp));
    }
    if (ends_on_stop_token && k == count - 1) break;
    absl::StatusOr<std::string> piece = c.detok.Add(id);
    if (!piece.ok()) {
      Fail(absl::InternalError(StrCat(
          "the worker sent token id ", id, ", outside the tokenizer's vocabulary of ",
          tokenizer_->vocab_size(), "; do the router and the worker serve the same model?")));
      return false;
    }
    tokenizer::StopStringMatcher::Result r = c.stops.Add(*piece);
    out->text += r.emit;
    if (r.stopped) {
      c.ended = true;
      out->finish_reason = "stop";
      out->stop_reason = r.matched;
      c.ctx.TryCancel();  // the worker would generate on; the stream then ends CANCELLED
    }
  }
  if (!c.ended && msg.finished()) {
    c.ended = true;
    out->finish_reason = msg.finish_reason();
    out->stop_reason = msg.stop_reason();
    int32_t stop_id = 0;
    // The worker applies no stop strings: its stop reason is always a token id.
    if (!msg.stop_reason().empty() && absl::SimpleAtoi(msg.stop_reason(), &stop_id)) {
      out->stop_token_id = stop_id;
    }
    if (!c.stops.stopped()) {
      tokenizer::StopStringMatcher::Result tail = c.stops.Add(c.detok.Finish());
      out->text += tail.emit;
      if (tail.stopped) {
        out->finish_reason = "stop";
        out->stop_reason = tail.matched;
      } else {
        out->text += c.stops.Flush();
      }
    }
    out->num_preemptions = msg.timings().num_preemptions();
  }
  if (c.ended) {
    out->finished = true;
    out->prompt_tokens =
        c.prompt_tokens > 0 ? c.prompt_tokens : static_cast<int64_t>(request_.prompt_ids.size());
    out->cached_tokens = c.cached_tokens;
    out->completion_tokens = c.generated;
    out->queue_seconds = c.queue_seconds;
    out->time_to_first_token_seconds = c.time_to_first_token_seconds;
    --open_choices_;
  }
  return !out->token_ids.empty() || !out->text.empty() || out->finished;
}

}  // namespace baton::router
