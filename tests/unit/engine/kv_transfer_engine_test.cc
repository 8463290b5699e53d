// Disaggregation at the engine's seams, without a network: a prefill-role engine hands
// each layer's K/V to a sink that copies it into pages a decode-role engine reserved
// (ReserveKv), the decode engine takes the first token (CompleteKv) and continues the
// request (kv_transfer_id). Every request must give exactly the tokens and text the
// single-sequence path gives, whatever the two prefix caches held; afterwards both
// engines' pages are all free again.
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/strings.h"
#include "engine/engine.h"
#include "engine/generator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/kv_ranges.h"
#include "tests/unit/engine/test_models.h"

namespace baton::engine {
namespace {

using ::testing::HasSubstr;

const LoadedModel& Tiny() { return testing::BatonTiny(); }

EngineOptions Options() {
  EngineOptions o;
  o.threads = 2;
  o.kv_cache_bytes = int64_t{32} << 20;
  o.max_batched_tokens = 96;
  o.max_prefill_chunk = 24;  // several chunks per prompt, some starting mid-block
  o.max_running = 8;
  return o;
}

// Copies what the prefill engine computed into the decode engine's reserved pages, range
// by range, as the UCX sink puts them.
class CopySink : public kvcache::KvSink {
 public:
  CopySink(Engine* from, Engine* to, const KvReservation& r, int64_t prompt_len)
      : from_(from),
        to_(to),
        pages_(r.pages),
        cursor_(from->kv_layout(), r.cached_blocks, prompt_len),
        first_block_(r.cached_blocks) {}

  void OnLayerWritten(int64_t layer, std::span<const int32_t> table, int64_t start,
                      int64_t count) override {
    EXPECT_TRUE(layer == last_layer_ + 1 || layer == 0) << "layers come in order";
    last_layer_ = layer;
    const int64_t page_bytes = from_->kv_layout().page_bytes();
    cursor_.OnLayerWritten(layer, start, count, [&](const kvcache::KvRange& r) {
      ASSERT_GE(r.block, first_block_);
      ASSERT_LT(r.block - first_block_, static_cast<int64_t>(pages_.size()));
      const std::byte* src = from_->kv_pool_data() + table[r.block] * page_bytes + r.offset;
      std::byte* dst = to_->kv_pool_data() + pages_[r.block - first_block_] * page_bytes + r.offset;
      std::memcpy(dst, src, static_cast<size_t>(r.bytes));
      bytes_ += r.bytes;
    });
  }

  absl::Status Drain(std::span<const int32_t> /*table*/, bool done) override {
    if (done) ++done_calls_;
    return fail_drain_ ? absl::UnavailableError("the decode worker went away") : absl::OkStatus();
  }

  int64_t bytes() const { return bytes_; }
  int done_calls() const { return done_calls_; }
  void FailDrains() { fail_drain_ = true; }

 private:
  Engine* from_;
  Engine* to_;
  std::vector<int32_t> pages_;
  kvcache::KvPushCursor cursor_;
  int64_t first_block_;
  int64_t last_layer_ = -1;
  int64_t bytes_ = 0;
  int done_calls_ = 0;
  bool fail_drain_ = false;
};

struct Result {
  std::vector<int32_t> ids;
  std::string text;
  TokenEvent last;
};

Result Collect(RequestStream* s) {
  Result r;
  TokenEvent e;
  while (s->Next(&e)) {
    r.ids.insert(r.ids.end(), e.token_ids.begin(), e.token_ids.end());
    r.text += e.text;
    if (e.finished) r.last = e;
  }
  return r;
}

// One request across the two engines, the way the workers run it.
Result RunSplit(Engine* prefill, Engine* decode, const EngineRequest& request,
                int64_t* sent_bytes = nullptr, int64_t* receiver_cached_blocks = nullptr) {
  absl::StatusOr<KvReservation> r =
      decode->ReserveKv(request.id, request.prompt_ids, request.cache_salt);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  if (receiver_cached_blocks != nullptr) *receiver_cached_blocks = r->cached_blocks;
  auto sink = std::make_shared<CopySink>(prefill, decode, *r,
                                         static_cast<int64_t>(request.prompt_ids.size()));
  EngineRequest first = request;
  first.params.max_tokens = 1;
  first.kv_sink = sink;
  auto stream = prefill->Submit(first);
  EXPECT_TRUE(stream.ok()) << stream.status();
  if (!stream.ok()) return {};
  Result head = Collect(stream->get());
  EXPECT_TRUE(head.last.status.ok()) << head.last.status;
  EXPECT_EQ(head.ids.size(), 1u);
  EXPECT_EQ(sink->done_calls(), 1) << "one Drain with the prompt complete";
  if (sent_bytes != nullptr) *sent_bytes = sink->bytes();
  SampledToken token;
  token.id = head.ids.at(0);
  if (!head.last.logprobs.empty()) token = head.last.logprobs[0];
  EXPECT_TRUE(decode->CompleteKv(request.id, token, head.last.usage.cached_tokens).ok());
  EngineRequest rest = request;
  rest.kv_transfer_id = request.id;
  auto continued = decode->Submit(rest);
  EXPECT_TRUE(continued.ok()) << continued.status();
  if (!continued.ok()) return {};
  return Collect(continued->get());
}

std::vector<EngineRequest> Requests(const LoadedModel& m, int n) {
  std::mt19937 rng(7);
  const int32_t vocab = static_cast<int32_t>(
      std::min<int64_t>(m.model->config().vocab_size, m.tokenizer.tokenizer->vocab_size()));
  std::vector<int32_t> shared;
  for (int i = 0; i < 37; ++i) shared.push_back(3 + static_cast<int32_t>(rng() % (vocab - 3)));
  std::vector<EngineRequest> out;
  for (int i = 0; i < n; ++i) {
    EngineRequest r;
    r.id = StrCat("t", i);
    if (i % 3 != 2) r.prompt_ids = shared;  // later ones hit both prefix caches
    const int extra = 1 + static_cast<int>(rng() % 40);
    for (int k = 0; k < extra; ++k) {
      r.prompt_ids.push_back(3 + static_cast<int32_t>(rng() % (vocab - 3)));
    }
    r.params.max_tokens = 1 + static_cast<int64_t>(rng() % 30);
    r.params.seed = 500 + i;
    if (i % 2 == 0) {
      r.params.temperature = 0.9;
      r.params.top_p = 0.9;
      r.params.presence_penalty = 0.5;
    } else {
      r.params.temperature = 0;
    }
    if (i % 4 == 1) r.params.logprobs = 3;
    out.push_back(std::move(r));
  }
  return out;
}

void ExpectAllFree(Engine* e) {
  e->WaitIdle();
  const EngineStats s = e->Stats();
  EXPECT_EQ(s.pages_used, 0);
  EXPECT_EQ(s.pages_free, s.pages_total);
  EXPECT_EQ(s.kv_reservations, 0);
  EXPECT_EQ(s.kv_pages_reserved, 0);
}

TEST(KvTransferEngineTest, SplitRequestsMatchTheSingleSequencePath) {
  const LoadedModel& m = Tiny();
  auto prefill = Engine::Create(&m, Options());
  auto decode = Engine::Create(&m, Options());
  ASSERT_TRUE(prefill.ok() && decode.ok());
  ThreadPool threads(2);
  int64_t full_bytes = 0, shared_bytes = 0, cached = 0;
  const std::vector<EngineRequest> requests = Requests(m, 12);
  for (size_t i = 0; i < requests.size(); ++i) {
    const EngineRequest& r = requests[i];
    SCOPED_TRACE(r.id);
    int64_t sent = 0, receiver_cached = 0;
    Result got = RunSplit(prefill->get(), decode->get(), r, &sent, &receiver_cached);
    auto want = Generate(m, &threads, r.prompt_ids, r.params, {}, nullptr);
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ(got.ids, want->output_ids);
    EXPECT_EQ(got.text, want->text);
    EXPECT_EQ(FinishReasonName(got.last.finish_reason), want->finish_reason);
    EXPECT_EQ(got.last.usage.completion_tokens, static_cast<int64_t>(want->output_ids.size()));
    if (i == 0) full_bytes = sent;
    if (i == 3) {
      shared_bytes = sent;
      cached = receiver_cached;
    }
  }
  // The fourth request shares 37 tokens (two full blocks) with earlier ones that the
  // decode engine kept: those blocks are not sent again.
  EXPECT_EQ(cached, 2);
  EXPECT_GT(full_bytes, 0);
  EXPECT_GT(shared_bytes, 0);
  const int64_t per_token = (*prefill)->kv_layout().page_bytes() / 16;
  EXPECT_EQ(shared_bytes, (static_cast<int64_t>(requests[3].prompt_ids.size()) - 32) * per_token);
  EXPECT_EQ(full_bytes, static_cast<int64_t>(requests[0].prompt_ids.size()) * per_token);
  EXPECT_GT((*decode)->Stats().kv_transfers_admitted, 0);
  ExpectAllFree(prefill->get());
  ExpectAllFree(decode->get());
}

TEST(KvTransferEngineTest, AFullyCachedPromptStillSendsItsLastBlock) {
  const LoadedModel& m = Tiny();
  auto prefill = Engine::Create(&m, Options());
  auto decode = Engine::Create(&m, Options());
  ASSERT_TRUE(prefill.ok() && decode.ok());
  EngineRequest r = Requests(m, 2)[1];
  r.prompt_ids.resize(48);  // three full blocks
  ThreadPool threads(2);
  auto want = Generate(m, &threads, r.prompt_ids, r.params, {}, nullptr);
  ASSERT_TRUE(want.ok());
  for (int round = 0; round < 2; ++round) {
    r.id = StrCat("full", round);
    int64_t sent = 0, cached = 0;
    const Result got = RunSplit(prefill->get(), decode->get(), r, &sent, &cached);
    EXPECT_EQ(got.ids, want->output_ids);
    // The second time the decode engine holds all three blocks; the contract still sends
    // the last one, so that no transfer is empty.
    EXPECT_EQ(cached, round == 0 ? 0 : 2);
    EXPECT_EQ(sent, (round == 0 ? 3 : 1) * (*prefill)->kv_layout().page_bytes());
  }
  ExpectAllFree(prefill->get());
  ExpectAllFree(decode->get());
}

TEST(KvTransferEngineTest, ReservationsAreCountedAndReleased) {
  const LoadedModel& m = Tiny();
  auto decode = Engine::Create(&m, Options());
  ASSERT_TRUE(decode.ok());
  std::vector<int32_t> prompt(40, 7);
  auto r = (*decode)->ReserveKv("a", prompt, "");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cached_blocks, 0);
  EXPECT_EQ(r->pages.size(), 3u);
  EngineStats s = (*decode)->Stats();
  EXPECT_EQ(s.kv_reservations, 1);
  EXPECT_EQ(s.kv_pages_reserved, 3);
  EXPECT_EQ(s.pages_used, 3);
  EXPECT_EQ((*decode)->ReserveKv("a", prompt, "").status().code(),
            absl::StatusCode::kAlreadyExists);
  // Claiming before completion fails cleanly and keeps the reservation.
  EngineRequest early;
  early.prompt_ids = prompt;
  early.kv_transfer_id = "a";
  auto stream = (*decode)->Submit(early);
  ASSERT_TRUE(stream.ok());
  Result res = Collect(stream->get());
  EXPECT_EQ(res.last.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(res.last.status.message(), HasSubstr("no completed KV transfer has id 'a'"));
  EXPECT_EQ((*decode)->Stats().kv_reservations, 1);
  // A completed transfer starts the request with its first token.
  SampledToken first;
  first.id = 5;
  ASSERT_TRUE((*decode)->CompleteKv("a", first, 0).ok());
  EXPECT_EQ((*decode)->CompleteKv("a", first, 0).code(), absl::StatusCode::kFailedPrecondition);
  EngineRequest right = early;
  right.params.max_tokens = 3;
  right.params.temperature = 0;
  stream = (*decode)->Submit(right);
  ASSERT_TRUE(stream.ok());
  res = Collect(stream->get());
  EXPECT_TRUE(res.last.status.ok()) << res.last.status;
  ASSERT_EQ(res.ids.size(), 3u);
  EXPECT_EQ(res.ids[0], 5) << "the transferred first token comes first";
  ExpectAllFree(decode->get());

  // A claim with another prompt is refused, and frees the reservation it took over.
  ASSERT_TRUE((*decode)->ReserveKv("c", prompt, "").ok());
  ASSERT_TRUE((*decode)->CompleteKv("c", first, 0).ok());
  EngineRequest other = early;
  other.kv_transfer_id = "c";
  other.prompt_ids.back() = 8;
  stream = (*decode)->Submit(other);
  ASSERT_TRUE(stream.ok());
  res = Collect(stream->get());
  EXPECT_EQ(res.last.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(res.last.status.message(), HasSubstr("is not the one KV transfer 'c' carried"));
  ExpectAllFree(decode->get());

  ASSERT_TRUE((*decode)->ReserveKv("b", prompt, "").ok());
  EXPECT_TRUE((*decode)->ReleaseKv("b").ok());
  EXPECT_EQ((*decode)->ReleaseKv("b").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*decode)->CompleteKv("b", first, 0).code(), absl::StatusCode::kNotFound);
  first.id = -1;
  EXPECT_EQ((*decode)->CompleteKv("b", first, 0).code(), absl::StatusCode::kInvalidArgument);
  ExpectAllFree(decode->get());
}

TEST(KvTransferEngineTest, ReserveChecksItsInputAndThePool) {
  const LoadedModel& m = Tiny();
  EngineOptions o = Options();
  o.kv_cache_bytes = 6 * PageLayoutFor(m.model->config(), 16, o.kv_cache_dtype).page_bytes();
  auto decode = Engine::Create(&m, o);
  ASSERT_TRUE(decode.ok());
  EXPECT_EQ((*decode)->ReserveKv("", {1, 2}, "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT((*decode)->ReserveKv("x", {}, "").status().message(), HasSubstr("prompt is empty"));
  EXPECT_THAT((*decode)->ReserveKv("x", {-3}, "").status().message(),
              HasSubstr("outside the vocabulary"));
  ASSERT_TRUE((*decode)->ReserveKv("x", std::vector<int32_t>(64, 9), "").ok());  // 4 pages
  auto full = (*decode)->ReserveKv("y", std::vector<int32_t>(48, 9), "s");
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.status().message(), HasSubstr("needs 3 free KV pages and 2 are free"));
  ASSERT_TRUE((*decode)->ReleaseKv("x").ok());
  ExpectAllFree(decode->get());
}

TEST(KvTransferEngineTest, AFailedSinkFailsTheRequestAndFreesItsPages) {
  const LoadedModel& m = Tiny();
  auto prefill = Engine::Create(&m, Options());
  auto decode = Engine::Create(&m, Options());
  ASSERT_TRUE(prefill.ok() && decode.ok());
  EngineRequest r = Requests(m, 1)[0];
  auto res = (*decode)->ReserveKv(r.id, r.prompt_ids, "");
  ASSERT_TRUE(res.ok());
  auto sink = std::make_shared<CopySink>(prefill->get(), decode->get(), *res,
                                         static_cast<int64_t>(r.prompt_ids.size()));
  sink->FailDrains();
  r.kv_sink = sink;
  r.params.max_tokens = 1;
  auto stream = (*prefill)->Submit(r);
  ASSERT_TRUE(stream.ok());
  Result got = Collect(stream->get());
  EXPECT_TRUE(got.ids.empty());
  EXPECT_EQ(got.last.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE((*decode)->ReleaseKv(r.id).ok());
  ExpectAllFree(prefill->get());
  ExpectAllFree(decode->get());
}

}  // namespace
}  // namespace baton::engine
