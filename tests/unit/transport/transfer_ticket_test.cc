#include "transport/transfer_ticket.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/kv_checksum.h"
#include "kvcache/slice_copy.h"
#include "xxhash.h"

namespace baton::transport {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kNowMs = 1'700'000'000'000;
constexpr int64_t kPoolPages = 512;
const absl::Time kNow = absl::FromUnixMillis(kNowMs);

// The page size computed here, independently of PageLayout::page_bytes().
int64_t PageBytes(const PageLayout& l) {
  return l.num_layers * 2 * l.block_size * l.num_kv_heads * l.head_dim * (l.dtype == "f32" ? 4 : 2);
}

PageLayout Layout() {
  PageLayout l;
  l.num_layers = 2;
  l.num_kv_heads = 4;
  l.head_dim = 4;
  l.block_size = 16;
  l.dtype = "f32";
  l.tp_rank = 0;
  l.tp_size = 1;
  return l;
}

// 40 tokens make 3 blocks of 16; block 0 is cached, blocks 1 and 2 go to pages 7 and 3.
TransferTicket Ticket() {
  TransferTicket t;
  t.request_id = "req-1";
  t.worker_address = std::string(64, '\x07');
  t.rkey = std::string(32, '\x09');
  t.pool_base = 0x7f0000000000;
  t.layout = Layout();
  t.pool_bytes = static_cast<uint64_t>(kPoolPages * PageBytes(t.layout));
  t.prompt_tokens = 40;
  t.first_block = 1;
  t.page_ids = {7, 3};
  t.cached_block_hashes = {std::string(32, '\xab')};
  t.lease_deadline_unix_ms = kNowMs + 60'000;
  return t;
}

// The receiver's layout changed consistently: the pool follows.
void Relayout(TransferTicket* t) {
  t->pool_bytes = static_cast<uint64_t>(kPoolPages * PageBytes(t->layout));
}

TEST(DtypeBytesTest, KnownAndUnknown) {
  EXPECT_EQ(kvcache::DtypeBytes("f32"), 4);
  EXPECT_EQ(kvcache::DtypeBytes("bf16"), 2);
  EXPECT_EQ(kvcache::DtypeBytes("f16"), 2);
  EXPECT_EQ(kvcache::DtypeBytes("f64"), 0);
  EXPECT_EQ(kvcache::DtypeBytes(""), 0);
  EXPECT_EQ(kvcache::DtypeBytes("F32"), 0);
}

TEST(PageLayoutTest, PageBytesIsTheProductAndCheckedRefusesOverflow) {
  PageLayout l = Layout();
  EXPECT_EQ(l.page_bytes(), PageBytes(l));
  EXPECT_EQ(l.checked_page_bytes(), PageBytes(l));
  l.num_layers = int64_t{1} << 40;
  l.num_kv_heads = int64_t{1} << 30;
  EXPECT_FALSE(l.checked_page_bytes().has_value());
  l = Layout();
  l.dtype = "f64";
  EXPECT_FALSE(l.checked_page_bytes().has_value());
  l = Layout();
  l.head_dim = 0;
  EXPECT_FALSE(l.checked_page_bytes().has_value());
}

TEST(ValidateTicketTest, ValidTicketPasses) {
  EXPECT_TRUE(ValidateTicket(Ticket(), Layout(), TicketLimits{}, kNow).ok());
  EXPECT_EQ(Layout().page_bytes(), 4096);
}

struct TicketCase {
  std::string name;
  std::function<void(TransferTicket*)> mutate;
  absl::StatusCode code;             // kOk: the ticket is still valid
  std::vector<std::string> substrs;  // each must be in the message
};

std::ostream& operator<<(std::ostream& os, const TicketCase& c) { return os << c.name; }

class TicketCaseTest : public ::testing::TestWithParam<TicketCase> {};

TEST_P(TicketCaseTest, GivesExpectedStatus) {
  const TicketCase& c = GetParam();
  TransferTicket t = Ticket();
  c.mutate(&t);
  TicketLimits limits;
  const absl::Status s = ValidateTicket(t, Layout(), limits, kNow);
  EXPECT_EQ(s.code(), c.code) << s;
  for (const std::string& sub : c.substrs) EXPECT_THAT(std::string(s.message()), HasSubstr(sub));
}

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
constexpr auto kPrecondition = absl::StatusCode::kFailedPrecondition;
constexpr auto kDeadline = absl::StatusCode::kDeadlineExceeded;
constexpr auto kOk = absl::StatusCode::kOk;

const TicketCase kTicketCases[] = {
    // Opaque byte strings.
    {"RequestIdEmpty",
     [](TransferTicket* t) { t->request_id.clear(); },
     kInvalid,
     {"ticket.request_id", "empty"}},
    {"RequestIdTooLong",
     [](TransferTicket* t) { t->request_id = std::string(257, 'r'); },
     kInvalid,
     {"ticket.request_id is 257 bytes", "256"}},
    {"RequestIdAtLimit", [](TransferTicket* t) { t->request_id = std::string(256, 'r'); }, kOk, {}},
    {"WorkerAddressEmpty",
     [](TransferTicket* t) { t->worker_address.clear(); },
     kInvalid,
     {"ticket.worker_address", "empty"}},
    {"WorkerAddressTooLong",
     [](TransferTicket* t) { t->worker_address = std::string(4097, 'a'); },
     kInvalid,
     {"ticket.worker_address is 4097 bytes", "4096"}},
    {"RkeyEmpty", [](TransferTicket* t) { t->rkey.clear(); }, kInvalid, {"ticket.rkey", "empty"}},
    {"RkeyTooLong",
     [](TransferTicket* t) { t->rkey = std::string(4097, 'k'); },
     kInvalid,
     {"ticket.rkey is 4097 bytes", "4096"}},

    // Layout sanity.
    {"NumLayersZero",
     [](TransferTicket* t) { t->layout.num_layers = 0; },
     kInvalid,
     {"ticket.layout.num_layers is 0"}},
    {"NumKvHeadsNegative",
     [](TransferTicket* t) { t->layout.num_kv_heads = -4; },
     kInvalid,
     {"ticket.layout.num_kv_heads is -4"}},
    {"HeadDimZero",
     [](TransferTicket* t) { t->layout.head_dim = 0; },
     kInvalid,
     {"ticket.layout.head_dim is 0"}},
    {"BlockSizeZero",
     [](TransferTicket* t) { t->layout.block_size = 0; },
     kInvalid,
     {"ticket.layout.block_size is 0"}},
    {"DtypeUnknown",
     [](TransferTicket* t) { t->layout.dtype = "f64"; },
     kInvalid,
     {"ticket.layout.dtype is 'f64'", "f32, bf16, f16"}},
    {"DtypeBinary",
     [](TransferTicket* t) { t->layout.dtype = std::string("\x01\xff", 2); },
     kInvalid,
     {"ticket.layout.dtype is 2 bytes"}},
    {"TpSizeZero",
     [](TransferTicket* t) { t->layout.tp_size = 0; },
     kInvalid,
     {"ticket.layout.tp_size is 0"}},
    {"TpRankNegative",
     [](TransferTicket* t) { t->layout.tp_rank = -1; },
     kInvalid,
     {"ticket.layout.tp_rank is -1", "tp_size 1"}},
    {"TpRankEqualsSize",
     [](TransferTicket* t) { t->layout.tp_rank = 1; },
     kInvalid,
     {"ticket.layout.tp_rank is 1", "[0, tp_size 1)"}},
    {"PpRankEqualsSize",
     [](TransferTicket* t) { t->layout.pp_rank = 1; },
     kInvalid,
     {"ticket.layout.pp_rank is 1", "[0, pp_size 1)"}},
    {"PpSizeZero",
     [](TransferTicket* t) { t->layout.pp_size = 0; },
     kInvalid,
     {"ticket.layout.pp_size is 0", "at least 1"}},
    {"FirstLayerNegative",
     [](TransferTicket* t) { t->layout.first_layer = -1; },
     kInvalid,
     {"ticket.layout.first_layer is -1"}},
    {"PageBytesOverflow",
     [](TransferTicket* t) {
       t->layout.num_layers = int64_t{1} << 40;
       t->layout.head_dim = int64_t{1} << 20;
     },
     kInvalid,
     {"ticket.layout", "overflows int64"}},

    // Layout mismatch: well formed, but not ours.
    {"NumKvHeadsDiffer",
     [](TransferTicket* t) {
       t->layout.num_kv_heads = 8;
       Relayout(t);
     },
     kPrecondition,
     {"page layout differs", "num_kv_heads 8 (receiver) vs 4 (this worker)"}},
    {"NumLayersDiffer",
     [](TransferTicket* t) {
       t->layout.num_layers = 3;
       Relayout(t);
     },
     kPrecondition,
     {"num_layers 3 (receiver) vs 2 (this worker)"}},
    {"HeadDimDiffer",
     [](TransferTicket* t) {
       t->layout.head_dim = 16;
       Relayout(t);
     },
     kPrecondition,
     {"head_dim 16 (receiver) vs 4 (this worker)"}},
    {"BlockSizeDiffer",
     [](TransferTicket* t) {
       t->layout.block_size = 32;
       Relayout(t);
     },
     kPrecondition,
     {"block_size 32 (receiver) vs 16 (this worker)"}},
    {"DtypeDiffer",
     [](TransferTicket* t) {
       t->layout.dtype = "bf16";
       Relayout(t);
     },
     kPrecondition,
     {"dtype bf16 (receiver) vs f32 (this worker)", "same --kv-cache-dtype"}},
    {"TpSliceDiffer",
     [](TransferTicket* t) {
       t->layout.tp_rank = 1;
       t->layout.tp_size = 2;
     },
     kPrecondition,
     {"tp_rank 1 (receiver) vs 0 (this worker)"}},
    {"TpSizeDiffer",
     [](TransferTicket* t) { t->layout.tp_size = 2; },
     kPrecondition,
     {"tp_size 2 (receiver) vs 1 (this worker)"}},
    {"HeadSliceDiffers",
     [](TransferTicket* t) { t->layout.first_kv_head = 2; },
     kPrecondition,
     {"first_kv_head 2 (receiver) vs 0 (this worker)"}},
    {"PipelineStageDiffers",
     [](TransferTicket* t) {
       t->layout.first_layer = 3;
       t->layout.pp_rank = 1;
       t->layout.pp_size = 2;
     },
     kPrecondition,
     {"first_layer 3 (receiver) vs 0 (this worker)"}},

    // The pool.
    {"PoolBytesZero",
     [](TransferTicket* t) { t->pool_bytes = 0; },
     kInvalid,
     {"ticket.pool_bytes is 0"}},
    {"PoolBytesNotWholePages",
     [](TransferTicket* t) { t->pool_bytes += 1; },
     kInvalid,
     {"ticket.pool_bytes is 2097153", "multiple of page_bytes 4096"}},
    {"PoolWraps",
     [](TransferTicket* t) { t->pool_base = std::numeric_limits<uint64_t>::max() - 4096; },
     kInvalid,
     {"ticket.pool_base", "overflows"}},
    {"PoolEndsAtTop",
     [](TransferTicket* t) { t->pool_base = std::numeric_limits<uint64_t>::max() - t->pool_bytes; },
     kOk,
     {}},

    // The prompt and its blocks.
    {"PromptTokensZero",
     [](TransferTicket* t) { t->prompt_tokens = 0; },
     kInvalid,
     {"ticket.prompt_tokens is 0", "[1, 1048576]"}},
    {"PromptTokensNegative",
     [](TransferTicket* t) { t->prompt_tokens = -5; },
     kInvalid,
     {"ticket.prompt_tokens is -5"}},
    {"PromptTokensOverLimit",
     [](TransferTicket* t) { t->prompt_tokens = (1 << 20) + 1; },
     kInvalid,
     {"ticket.prompt_tokens is 1048577", "1048576"}},
    {"PromptTokensMaxInt64",
     [](TransferTicket* t) { t->prompt_tokens = std::numeric_limits<int64_t>::max(); },
     kInvalid,
     {"ticket.prompt_tokens"}},
    {"FirstBlockNegative",
     [](TransferTicket* t) { t->first_block = -1; },
     kInvalid,
     {"ticket.first_block is -1", "[0, 3)"}},
    {"FirstBlockIsBlocks",  // would send nothing: the last block is always sent
     [](TransferTicket* t) {
       t->first_block = 3;
       t->page_ids = {};
       t->cached_block_hashes.assign(3, std::string(32, 'h'));
     },
     kInvalid,
     {"ticket.first_block is 3", "[0, 3)"}},
    {"FirstBlockLastBlock",
     [](TransferTicket* t) {
       t->first_block = 2;
       t->page_ids = {5};
       t->cached_block_hashes.assign(2, std::string(32, 'h'));
     },
     kOk,
     {}},
    {"FirstBlockZero",
     [](TransferTicket* t) {
       t->first_block = 0;
       t->page_ids = {0, 1, 2};
       t->cached_block_hashes.clear();
     },
     kOk,
     {}},
    {"PromptFullBlocks",  // 32 tokens are exactly 2 blocks
     [](TransferTicket* t) {
       t->prompt_tokens = 32;
       t->page_ids = {7};
     },
     kOk,
     {}},
    {"PromptOneBlockMore",  // 49 tokens make 4 blocks: one page short
     [](TransferTicket* t) { t->prompt_tokens = 49; },
     kInvalid,
     {"ticket.page_ids has 2 entries", "need exactly 3"}},
    {"PageIdsTooMany",
     [](TransferTicket* t) { t->page_ids.push_back(9); },
     kInvalid,
     {"ticket.page_ids has 3 entries", "need exactly 2"}},
    {"PageIdsTooFew",
     [](TransferTicket* t) { t->page_ids.pop_back(); },
     kInvalid,
     {"ticket.page_ids has 1 entries", "need exactly 2"}},
    {"HashesTooFew",
     [](TransferTicket* t) { t->cached_block_hashes.clear(); },
     kInvalid,
     {"ticket.cached_block_hashes has 0 entries", "first_block 1"}},
    {"HashesTooMany",
     [](TransferTicket* t) { t->cached_block_hashes.push_back(std::string(32, 'h')); },
     kInvalid,
     {"ticket.cached_block_hashes has 2 entries"}},
    {"HashShort",
     [](TransferTicket* t) { t->cached_block_hashes[0].pop_back(); },
     kInvalid,
     {"ticket.cached_block_hashes[0] is 31 bytes", "exactly 32"}},
    {"HashLong",
     [](TransferTicket* t) { t->cached_block_hashes[0] += 'x'; },
     kInvalid,
     {"ticket.cached_block_hashes[0] is 33 bytes"}},

    // Page ids.
    {"LastPageIdValid", [](TransferTicket* t) { t->page_ids[1] = kPoolPages - 1; }, kOk, {}},
    {"PageIdOnePastPool",
     [](TransferTicket* t) { t->page_ids[1] = kPoolPages; },
     kInvalid,
     {"ticket.page_ids[1] is 512; the pool has 512 pages"}},
    {"PageIdFarOutside",
     [](TransferTicket* t) { t->page_ids[0] = 900; },
     kInvalid,
     {"ticket.page_ids[0] is 900; the pool has 512 pages"}},
    {"PageIdNegative",
     [](TransferTicket* t) { t->page_ids[0] = -1; },
     kInvalid,
     {"ticket.page_ids[0] is -1"}},
    {"PageIdMin",
     [](TransferTicket* t) { t->page_ids[0] = std::numeric_limits<int32_t>::min(); },
     kInvalid,
     {"ticket.page_ids[0] is -2147483648"}},
    {"PageIdDuplicate",
     [](TransferTicket* t) {
       t->page_ids = {3, 3};
     },
     kInvalid,
     {"ticket.page_ids[1] is 3, as is page_ids[0]"}},
    {"PageIdDuplicateApart",
     [](TransferTicket* t) {
       t->prompt_tokens = 64;  // 4 blocks, 3 pages
       t->page_ids = {4, 9, 4};
     },
     kInvalid,
     {"ticket.page_ids[2] is 4, as is page_ids[0]"}},

    // The lease.
    {"LeaseEndsNow",
     [](TransferTicket* t) { t->lease_deadline_unix_ms = kNowMs; },
     kDeadline,
     {"ticket.lease_deadline_unix_ms", "the lease ended 0 ms ago"}},
    {"LeaseEndedBefore",
     [](TransferTicket* t) { t->lease_deadline_unix_ms = kNowMs - 5000; },
     kDeadline,
     {"the lease ended 5000 ms ago"}},
    {"LeaseMinInt64",
     [](TransferTicket* t) { t->lease_deadline_unix_ms = std::numeric_limits<int64_t>::min(); },
     kDeadline,
     {"ticket.lease_deadline_unix_ms"}},
    {"LeaseEndsNextMs", [](TransferTicket* t) { t->lease_deadline_unix_ms = kNowMs + 1; }, kOk, {}},
    {"LeaseAtMax",
     [](TransferTicket* t) { t->lease_deadline_unix_ms = kNowMs + 600'000; },
     kOk,
     {}},
    {"LeaseTooLong",
     [](TransferTicket* t) { t->lease_deadline_unix_ms = kNowMs + 600'001; },
     kInvalid,
     {"ticket.lease_deadline_unix_ms", "at most 600000 ms"}},
    {"LeaseMaxInt64",
     [](TransferTicket* t) { t->lease_deadline_unix_ms = std::numeric_limits<int64_t>::max(); },
     kInvalid,
     {"ticket.lease_deadline_unix_ms", "at most 600000 ms"}},
};

INSTANTIATE_TEST_SUITE_P(Rules, TicketCaseTest, ::testing::ValuesIn(kTicketCases),
                         [](const ::testing::TestParamInfo<TicketCase>& info) {
                           return info.param.name;
                         });

TEST(ValidateTicketTest, LimitsAreTheCallers) {
  TicketLimits limits;
  limits.max_prompt_tokens = 40;
  EXPECT_TRUE(ValidateTicket(Ticket(), Layout(), limits, kNow).ok());
  limits.max_prompt_tokens = 39;
  const absl::Status s = ValidateTicket(Ticket(), Layout(), limits, kNow);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("ticket.prompt_tokens is 40; it must be in [1, 39]"));

  limits = TicketLimits{};
  limits.max_lease = absl::Seconds(30);
  EXPECT_EQ(ValidateTicket(Ticket(), Layout(), limits, kNow).code(),
            absl::StatusCode::kInvalidArgument);
  limits.max_lease = absl::InfiniteDuration();
  TransferTicket t = Ticket();
  t.lease_deadline_unix_ms = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(ValidateTicket(t, Layout(), limits, kNow).ok());
}

TEST(ValidateTicketTest, LeaseBoundaryUsesWholeMilliseconds) {
  // Half a millisecond before the deadline the lease still runs; at it, it has ended.
  TransferTicket t = Ticket();
  t.lease_deadline_unix_ms = kNowMs + 1;
  EXPECT_TRUE(ValidateTicket(t, Layout(), TicketLimits{}, kNow + absl::Microseconds(500)).ok());
  EXPECT_EQ(ValidateTicket(t, Layout(), TicketLimits{}, kNow + absl::Milliseconds(1)).code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(ValidateTicketTest, OtherDtypes) {
  PageLayout local = Layout();
  local.dtype = "bf16";
  EXPECT_EQ(local.page_bytes(), 2048);
  TransferTicket t = Ticket();
  t.layout = local;
  Relayout(&t);
  EXPECT_TRUE(ValidateTicket(t, local, TicketLimits{}, kNow).ok());
}

// ---- ValidateComplete ----

TransferComplete Complete() {
  TransferComplete c;
  c.request_id = "req-1";
  c.first_token = 42;
  c.blocks_written = 2;
  c.bytes_written = 2 * 4096;
  c.checksum = 0x1234;
  return c;
}

constexpr int32_t kVocab = 1000;

TEST(ValidateCompleteTest, ValidCompletePasses) {
  EXPECT_TRUE(ValidateComplete(Complete(), Ticket(), kVocab).ok());
}

struct CompleteCase {
  std::string name;
  std::function<void(TransferComplete*)> mutate;
  absl::StatusCode code;
  std::vector<std::string> substrs;
};

std::ostream& operator<<(std::ostream& os, const CompleteCase& c) { return os << c.name; }

class CompleteCaseTest : public ::testing::TestWithParam<CompleteCase> {};

TEST_P(CompleteCaseTest, GivesExpectedStatus) {
  const CompleteCase& c = GetParam();
  TransferComplete complete = Complete();
  c.mutate(&complete);
  const absl::Status s = ValidateComplete(complete, Ticket(), kVocab);
  EXPECT_EQ(s.code(), c.code) << s;
  for (const std::string& sub : c.substrs) EXPECT_THAT(std::string(s.message()), HasSubstr(sub));
}

constexpr auto kDataLoss = absl::StatusCode::kDataLoss;

const CompleteCase kCompleteCases[] = {
    {"OtherRequest",
     [](TransferComplete* c) { c->request_id = "req-2"; },
     kInvalid,
     {"complete.request_id", "ticket's request_id"}},
    {"NoRequest",
     [](TransferComplete* c) { c->request_id.clear(); },
     kInvalid,
     {"complete.request_id"}},
    {"BlocksShort",
     [](TransferComplete* c) {
       c->blocks_written = 1;
       c->bytes_written = 4096;
     },
     kDataLoss,
     {"complete.blocks_written is 1", "the ticket has 2 pages"}},
    {"BlocksOver",
     [](TransferComplete* c) {
       c->blocks_written = 3;
       c->bytes_written = 3 * 4096;
     },
     kDataLoss,
     {"complete.blocks_written is 3"}},
    {"BlocksNegative",
     [](TransferComplete* c) { c->blocks_written = -2; },
     kDataLoss,
     {"complete.blocks_written is -2"}},
    {"BytesShort",
     [](TransferComplete* c) { c->bytes_written -= 1; },
     kDataLoss,
     {"complete.bytes_written is 8191", "page_bytes 4096 is 8192"}},
    {"BytesOver",
     [](TransferComplete* c) { c->bytes_written = ~uint64_t{0}; },
     kDataLoss,
     {"complete.bytes_written"}},
    {"FirstTokenNegative",
     [](TransferComplete* c) { c->first_token = -1; },
     kInvalid,
     {"complete.first_token is -1", "vocab_size 1000"}},
    {"FirstTokenIsVocabSize",
     [](TransferComplete* c) { c->first_token = kVocab; },
     kInvalid,
     {"complete.first_token is 1000", "vocab_size 1000"}},
    {"FirstTokenLast", [](TransferComplete* c) { c->first_token = kVocab - 1; }, kOk, {}},
    {"FirstTokenZero", [](TransferComplete* c) { c->first_token = 0; }, kOk, {}},
    {"ChecksumIsNotChecked", [](TransferComplete* c) { c->checksum = 0; }, kOk, {}},
};

INSTANTIATE_TEST_SUITE_P(Rules, CompleteCaseTest, ::testing::ValuesIn(kCompleteCases),
                         [](const ::testing::TestParamInfo<CompleteCase>& info) {
                           return info.param.name;
                         });

TEST(ValidateCompleteTest, HostileTicketDoesNotOverflow) {
  // ValidateComplete runs against the receiver's own ticket, but must stay defined even on
  // one it never validated.
  TransferTicket t = Ticket();
  t.layout.num_layers = std::numeric_limits<int64_t>::max();
  t.page_ids = {1, 2, 3};
  TransferComplete c = Complete();
  c.blocks_written = 3;
  EXPECT_EQ(ValidateComplete(c, t, kVocab).code(), absl::StatusCode::kInvalidArgument);
  t.layout.num_layers = -1;
  EXPECT_EQ(ValidateComplete(c, t, kVocab).code(), absl::StatusCode::kInvalidArgument);
}

// ---- Sliced transfers ----

// Rank `rank` of a TP group of `tp` over Layout()'s model (4 KV heads); above 4, the heads
// are replicated.
PageLayout TpSlice(int tp, int rank) {
  PageLayout l = Layout();
  l.tp_size = tp;
  l.tp_rank = rank;
  if (tp <= 4) {
    l.num_kv_heads = 4 / tp;
    l.first_kv_head = rank * l.num_kv_heads;
  } else {
    l.num_kv_heads = 1;
    l.first_kv_head = rank / (tp / 4);
  }
  return l;
}

RankPool Pool(int32_t rank, const PageLayout& layout) {
  RankPool r;
  r.rank = rank;
  r.worker_address = std::string(64, static_cast<char>('a' + rank));
  r.rkey = std::string(32, static_cast<char>('k' + rank));
  r.pool_base = 0x7f0000000000 + (static_cast<uint64_t>(rank) << 32);
  r.pool_bytes = static_cast<uint64_t>(kPoolPages * PageBytes(layout));
  r.layout = layout;
  return r;
}

// Ticket() from a TP2 receiver: the top-level fields describe rank 0.
TransferTicket SlicedTicket() {
  TransferTicket t = Ticket();
  t.ranks = {Pool(0, TpSlice(2, 0)), Pool(1, TpSlice(2, 1))};
  t.layout = t.ranks[0].layout;
  t.worker_address = t.ranks[0].worker_address;
  t.rkey = t.ranks[0].rkey;
  t.pool_base = t.ranks[0].pool_base;
  t.pool_bytes = t.ranks[0].pool_bytes;
  return t;
}

// Copies `prompt_len` tokens' K/V of blocks first_block.. from `src` pages to `dst` pages,
// as a sender rank writes them: SliceCopyRuns over each block's filled positions.
void CopySlices(const std::vector<std::byte>& src_pool, const PageLayout& src,
                const std::vector<int32_t>& src_pages, std::vector<std::byte>* dst_pool,
                const PageLayout& dst, const std::vector<int32_t>& dst_pages, int64_t first_block,
                int64_t prompt_len) {
  ASSERT_EQ(src_pages.size(), dst_pages.size());
  for (size_t i = 0; i < src_pages.size(); ++i) {
    const int64_t block = first_block + static_cast<int64_t>(i);
    const int64_t filled = std::min(prompt_len - block * src.block_size, src.block_size);
    ASSERT_GT(filled, 0);
    for (const kvcache::CopyRun& r : kvcache::SliceCopyRuns(src, dst, 0, INT64_MAX, 0, filled)) {
      const int64_t from = src_pages[i] * src.page_bytes() + r.src_offset;
      const int64_t to = dst_pages[i] * dst.page_bytes() + r.dst_offset;
      ASSERT_LE(from + r.bytes, static_cast<int64_t>(src_pool.size()));
      ASSERT_LE(to + r.bytes, static_cast<int64_t>(dst_pool->size()));
      std::memcpy(dst_pool->data() + to, src_pool.data() + from, static_cast<size_t>(r.bytes));
    }
  }
}

TEST(SliceKvChecksumTest, SenderAndReceiverAgreeOnTheBytesThatMoved) {
  // A model of 3 layers, 4 KV heads of 3 lanes, blocks of 4 tokens. The sender is rank 1
  // of a TP2 group (heads 2, 3), the receiver one rank holding all 4 heads.
  PageLayout model;
  model.num_layers = 3;
  model.num_kv_heads = 4;
  model.head_dim = 3;
  model.block_size = 4;
  model.dtype = "f32";
  PageLayout src = model;
  src.num_kv_heads = 2;
  src.first_kv_head = 2;
  src.tp_rank = 1;
  src.tp_size = 2;
  const PageLayout dst = model;
  ASSERT_TRUE(kvcache::CheckSliceCompatible(src, dst).ok());

  // 14 tokens: blocks 0..3, block 3 holds 2 of 4 positions; block 0 is cached.
  constexpr int64_t kPages = 8, kPrompt = 14, kFirstBlock = 1;
  const std::vector<int32_t> src_pages = {5, 2, 7};
  const std::vector<int32_t> dst_pages = {1, 6, 3};
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  const auto fill = [&](std::vector<std::byte>* pool) {
    std::vector<float> f(pool->size() / sizeof(float));
    for (float& x : f) x = dist(rng);
    std::memcpy(pool->data(), f.data(), pool->size());
  };
  std::vector<std::byte> src_pool(static_cast<size_t>(kPages * src.page_bytes()));
  std::vector<std::byte> dst_pool(static_cast<size_t>(kPages * dst.page_bytes()));  // as many
  fill(&src_pool);
  fill(&dst_pool);
  CopySlices(src_pool, src, src_pages, &dst_pool, dst, dst_pages, kFirstBlock, kPrompt);
  if (HasFatalFailure()) return;

  const auto sender = [&] {
    return kvcache::SliceKvChecksum(src_pool.data(), src, dst, kvcache::SliceSide::kSource,
                                    src_pages, kFirstBlock, kPrompt);
  };
  const auto receiver = [&] {
    return kvcache::SliceKvChecksum(dst_pool.data(), src, dst, kvcache::SliceSide::kDestination,
                                    dst_pages, kFirstBlock, kPrompt);
  };
  const kvcache::KvChecksum want = sender();
  const kvcache::KvChecksum got = receiver();
  EXPECT_EQ(got.hash, want.hash);
  EXPECT_EQ(got.bytes, want.bytes);
  // 3 layers x K, V x (4 + 4 + 2) positions x 2 shared heads x 3 lanes x 4 bytes.
  EXPECT_EQ(want.bytes, 3u * 2 * 10 * 2 * 3 * 4);

  // The hash is XXH3-64 of those bytes, block by block, layer, head, K then V, the filled
  // positions (head-major pages: [layer][head][K, V][position][head_dim]).
  std::string moved;
  const int64_t head_bytes = src.head_dim * 4;
  for (size_t i = 0; i < src_pages.size(); ++i) {
    const int64_t filled = std::min<int64_t>(kPrompt - (kFirstBlock + i) * 4, 4);
    for (int64_t layer = 0; layer < 3; ++layer)
      for (int64_t head = 0; head < 2; ++head)
        for (int64_t half = 0; half < 2; ++half) {
          const int64_t off = src_pages[i] * src.page_bytes() +
                              (((layer * src.num_kv_heads + head) * 2 + half) * 4) * head_bytes;
          moved.append(reinterpret_cast<const char*>(src_pool.data()) + off,
                       static_cast<size_t>(filled * head_bytes));
        }
  }
  EXPECT_EQ(moved.size(), want.bytes);
  EXPECT_EQ(XXH3_64bits(moved.data(), moved.size()), want.hash);

  // Byte offset in the destination pool of (dst page i, layer, half, pos, model head).
  const auto dst_at = [&](size_t i, int64_t layer, int64_t half, int64_t pos, int64_t head) {
    return static_cast<size_t>(dst_pages[i] * dst.page_bytes() +
                               (((layer * dst.num_kv_heads + head) * 2 + half) * 4 + pos) *
                                   head_bytes);
  };
  // A byte the sender wrote, in a full block and in the partial one: the receiver's sum moves.
  for (const size_t at :
       {dst_at(0, 1, 1, 3, 3) + 5, dst_at(2, 2, 0, 1, 2), dst_at(2, 0, 1, 0, 3)}) {
    dst_pool[at] ^= std::byte{0x01};
    EXPECT_NE(receiver().hash, want.hash) << at;
    dst_pool[at] ^= std::byte{0x01};
  }
  EXPECT_EQ(receiver().hash, want.hash);
  // A byte of the partial block past the prompt, or of heads this sender does not hold: it
  // never moved, and the receiver's sum does not see it.
  for (const size_t at : {dst_at(2, 0, 0, 2, 2), dst_at(2, 2, 1, 3, 3) + 11, dst_at(0, 0, 0, 0, 0),
                          dst_at(1, 2, 1, 3, 1)}) {
    dst_pool[at] ^= std::byte{0x80};
    const kvcache::KvChecksum after = receiver();
    EXPECT_EQ(after.hash, want.hash) << at;
    EXPECT_EQ(after.bytes, want.bytes) << at;
    dst_pool[at] ^= std::byte{0x80};
  }
  // The sender's side sees its own bytes change.
  const size_t src_at = static_cast<size_t>(src_pages[1] * src.page_bytes() + 17);
  src_pool[src_at] ^= std::byte{0x40};
  EXPECT_NE(sender().hash, want.hash);
}

TEST(SliceKvChecksumTest, EqualSlicesAgreeWithThePromptChecksumBytes) {
  // One rank to one rank of the same slice: the same bytes as PromptKvChecksum counts.
  const PageLayout l = Layout();
  std::vector<std::byte> pool(static_cast<size_t>(4 * l.page_bytes()));
  for (size_t i = 0; i < pool.size(); ++i) pool[i] = static_cast<std::byte>(i * 31 + 7);
  const std::vector<int32_t> pages = {3, 1};
  const kvcache::KvChecksum slice = kvcache::SliceKvChecksum(
      pool.data(), l, l, kvcache::SliceSide::kSource, pages, /*first_block=*/1, 40);
  const kvcache::KvChecksum prompt = kvcache::PromptKvChecksum(pool.data(), l, pages, 1, 40);
  EXPECT_EQ(slice.bytes, prompt.bytes);
  EXPECT_EQ(slice.bytes, static_cast<uint64_t>(l.page_bytes() + 2 * 2 * 8 * 4 * 4 * 4));
  const kvcache::KvChecksum back =
      kvcache::SliceKvChecksum(pool.data(), l, l, kvcache::SliceSide::kDestination, pages, 1, 40);
  EXPECT_EQ(back.hash, slice.hash);
}

TEST(ExpectedSlicesTest, PairsOfWritersThatShareKv) {
  using Pairs = std::vector<std::pair<int32_t, int32_t>>;
  const std::vector<PageLayout> tp1 = {TpSlice(1, 0)};
  const std::vector<PageLayout> tp2 = {TpSlice(2, 0), TpSlice(2, 1)};
  EXPECT_EQ(ExpectedSlices(tp2, tp1), (Pairs{{0, 0}, {1, 0}}));
  EXPECT_EQ(ExpectedSlices(tp1, tp2), (Pairs{{0, 0}, {0, 1}}));
  EXPECT_EQ(ExpectedSlices(tp2, tp2), (Pairs{{0, 0}, {1, 1}}));
  EXPECT_EQ(ExpectedSlices(tp1, tp1), (Pairs{{0, 0}}));
  // TP4 into TP2: sender-major order.
  std::vector<PageLayout> tp4;
  for (int r = 0; r < 4; ++r) tp4.push_back(TpSlice(4, r));
  EXPECT_EQ(ExpectedSlices(tp4, tp2), (Pairs{{0, 0}, {1, 0}, {2, 1}, {3, 1}}));
  EXPECT_EQ(ExpectedSlices(tp2, tp4), (Pairs{{0, 0}, {0, 1}, {1, 2}, {1, 3}}));
}

TEST(ExpectedSlicesTest, ReplicaSendersAreSkipped) {
  using Pairs = std::vector<std::pair<int32_t, int32_t>>;
  // tp=8 over 4 heads: ranks 2k and 2k+1 hold head k; only the even ranks write.
  std::vector<PageLayout> tp8;
  for (int r = 0; r < 8; ++r) tp8.push_back(TpSlice(8, r));
  const std::vector<PageLayout> tp1 = {TpSlice(1, 0)};
  EXPECT_EQ(ExpectedSlices(tp8, tp1), (Pairs{{0, 0}, {2, 0}, {4, 0}, {6, 0}}));
  const std::vector<PageLayout> tp2 = {TpSlice(2, 0), TpSlice(2, 1)};
  EXPECT_EQ(ExpectedSlices(tp8, tp2), (Pairs{{0, 0}, {2, 0}, {4, 1}, {6, 1}}));
  // A replicated receiver takes from every writer whose heads it holds.
  EXPECT_EQ(ExpectedSlices(tp1, tp8),
            (Pairs{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 5}, {0, 6}, {0, 7}}));
}

TEST(ValidateSlicedTicketTest, ValidTicketPasses) {
  const TransferTicket t = SlicedTicket();
  const std::vector<PageLayout> tp1 = {Layout()};
  EXPECT_TRUE(ValidateTicketRanks(t, TicketLimits{}, kNow).ok())
      << ValidateTicketRanks(t, TicketLimits{}, kNow);
  EXPECT_TRUE(ValidateSlicedTicket(t, tp1, TicketLimits{}, kNow).ok())
      << ValidateSlicedTicket(t, tp1, TicketLimits{}, kNow);
  const std::vector<PageLayout> tp2 = {TpSlice(2, 0), TpSlice(2, 1)};
  EXPECT_TRUE(ValidateSlicedTicket(t, tp2, TicketLimits{}, kNow).ok());
  std::vector<PageLayout> tp4;
  for (int r = 0; r < 4; ++r) tp4.push_back(TpSlice(4, r));
  EXPECT_TRUE(ValidateSlicedTicket(t, tp4, TicketLimits{}, kNow).ok());
}

TEST(ValidateSlicedTicketTest, RanksOutOfOrderAreRefused) {
  const std::vector<PageLayout> tp1 = {Layout()};
  TransferTicket t = SlicedTicket();
  std::swap(t.ranks[0].rank, t.ranks[1].rank);
  absl::Status s = ValidateSlicedTicket(t, tp1, TicketLimits{}, kNow);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("ticket.ranks[0].rank is 1"));

  t = SlicedTicket();
  t.ranks[1].rank = 2;
  s = ValidateSlicedTicket(t, tp1, TicketLimits{}, kNow);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("ticket.ranks[1].rank is 2"));
}

TEST(ValidateSlicedTicketTest, EachRanksPoolIsChecked) {
  const std::vector<PageLayout> tp1 = {Layout()};
  // Rank 1's pool holds 5 pages; the ticket's page 7 is outside it.
  TransferTicket t = SlicedTicket();
  t.ranks[1].pool_bytes = static_cast<uint64_t>(5 * PageBytes(t.ranks[1].layout));
  absl::Status s = ValidateSlicedTicket(t, tp1, TicketLimits{}, kNow);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("ticket.ranks[1]"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("ticket.page_ids[0] is 7; the pool has 5 pages"));

  // Rank 1's rkey missing; rank 0's pool not whole pages.
  t = SlicedTicket();
  t.ranks[1].rkey.clear();
  s = ValidateSlicedTicket(t, tp1, TicketLimits{}, kNow);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("ticket.ranks[1]: ticket.rkey"));
  t = SlicedTicket();
  t.ranks[0].pool_bytes += 1;
  s = ValidateSlicedTicket(t, tp1, TicketLimits{}, kNow);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("ticket.ranks[0]: ticket.pool_bytes"));

  // A malformed rank layout.
  t = SlicedTicket();
  t.ranks[1].layout.tp_rank = 2;
  s = ValidateSlicedTicket(t, tp1, TicketLimits{}, kNow);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("ticket.ranks[1]"));

  // The lease, shared by all ranks.
  t = SlicedTicket();
  t.lease_deadline_unix_ms = kNowMs;
  EXPECT_EQ(ValidateSlicedTicket(t, tp1, TicketLimits{}, kNow).code(),
            absl::StatusCode::kDeadlineExceeded);

  // Ranks of other block sizes (a prompt of one block for both, so that the pages agree).
  t = SlicedTicket();
  t.prompt_tokens = 16;
  t.first_block = 0;
  t.page_ids = {7};
  t.cached_block_hashes.clear();
  ASSERT_TRUE(ValidateTicketRanks(t, TicketLimits{}, kNow).ok());
  t.ranks[1].layout.block_size = 32;
  t.ranks[1].pool_bytes = static_cast<uint64_t>(kPoolPages * PageBytes(t.ranks[1].layout));
  s = ValidateTicketRanks(t, TicketLimits{}, kNow);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("ticket.ranks[1].layout.block_size is 32"));
}

TEST(ValidateSlicedTicketTest, RankCountIsBounded) {
  const std::vector<PageLayout> tp1 = {Layout()};
  TransferTicket t = SlicedTicket();
  t.ranks.clear();
  absl::Status s = ValidateSlicedTicket(t, tp1, TicketLimits{}, kNow);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("ticket.ranks has 0 entries"));
  TicketLimits limits;
  limits.max_ranks = 1;
  s = ValidateSlicedTicket(SlicedTicket(), tp1, limits, kNow);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("ticket.ranks has 2 entries"));
}

TEST(ValidateSlicedTicketTest, SendersThatDoNotCoverAreRefused) {
  // One of two TP2 slices: receiver rank 1 (heads 2, 3) gets no writer.
  const std::vector<PageLayout> half = {TpSlice(2, 0)};
  const absl::Status s = ValidateSlicedTicket(SlicedTicket(), half, TicketLimits{}, kNow);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("layer 0 KV head 2"));
  // No senders at all.
  EXPECT_EQ(ValidateSlicedTicket(SlicedTicket(), {}, TicketLimits{}, kNow).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ValidateSlicedTicketTest, ARankOfAnotherModelIsRefused) {
  TransferTicket t = SlicedTicket();
  t.ranks[1].layout.head_dim = 8;
  t.ranks[1].pool_bytes = static_cast<uint64_t>(kPoolPages * PageBytes(t.ranks[1].layout));
  ASSERT_TRUE(ValidateTicketRanks(t, TicketLimits{}, kNow).ok());
  const std::vector<PageLayout> tp1 = {Layout()};
  const absl::Status s = ValidateSlicedTicket(t, tp1, TicketLimits{}, kNow);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("head_dim 4 (source) vs 8 (destination)"));
}

TEST(CheckSenderSlicesTest, MalformedSenderIsNamed) {
  const std::vector<PageLayout> receivers = {TpSlice(2, 0), TpSlice(2, 1)};
  std::vector<PageLayout> senders = {Layout()};
  EXPECT_TRUE(CheckSenderSlices(senders, receivers).ok());
  senders[0].num_layers = 0;
  absl::Status s = CheckSenderSlices(senders, receivers);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("sender_ranks[0].num_layers is 0"));

  senders = {TpSlice(2, 0), TpSlice(2, 1)};
  senders[1].dtype = "f64";
  s = CheckSenderSlices(senders, receivers);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("sender_ranks[1].dtype is 'f64'"));

  senders = {TpSlice(2, 0), TpSlice(2, 1)};
  senders[1].dtype = "bf16";
  s = CheckSenderSlices(senders, receivers);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("dtype"));
}

TEST(ValidateCompleteTest, SlicedTicketCountsEveryRanksPageBytes) {
  TransferTicket t = SlicedTicket();
  const uint64_t rank_page = static_cast<uint64_t>(PageBytes(TpSlice(2, 0)));
  ASSERT_EQ(rank_page, 2048u);
  TransferComplete c = Complete();
  c.checksum = 0;
  c.slices = {{0, 0, 0x11, 1}, {0, 1, 0x22, 1}};
  c.bytes_written = 2 * (rank_page + rank_page);
  EXPECT_TRUE(ValidateComplete(c, t, kVocab).ok()) << ValidateComplete(c, t, kVocab);
  // Rank 0's page alone is short.
  c.bytes_written = 2 * rank_page;
  absl::Status s = ValidateComplete(c, t, kVocab);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("page_bytes 4096 is 8192"));
  c.bytes_written = 2 * 2 * rank_page + 1;
  EXPECT_EQ(ValidateComplete(c, t, kVocab).code(), absl::StatusCode::kDataLoss);

  // Ranks of unequal slices: a stage of 2 layers and one of 1.
  PageLayout stage1 = TpSlice(2, 1);
  stage1.num_layers = 1;
  t.ranks[1].layout = stage1;
  const uint64_t sum = rank_page + static_cast<uint64_t>(PageBytes(stage1));
  ASSERT_EQ(sum, 3072u);
  c.bytes_written = 2 * sum;
  EXPECT_TRUE(ValidateComplete(c, t, kVocab).ok()) << ValidateComplete(c, t, kVocab);
  c.bytes_written = 2 * sum - 1;
  s = ValidateComplete(c, t, kVocab);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("page_bytes 3072 is 6144"));
  c.bytes_written = 2 * 4096;  // the whole model's page
  EXPECT_EQ(ValidateComplete(c, t, kVocab).code(), absl::StatusCode::kDataLoss);

  // A rank's hostile layout is not a byte count.
  c.bytes_written = 2 * sum;
  t.ranks[1].layout.num_layers = -1;
  EXPECT_EQ(ValidateComplete(c, t, kVocab).code(), absl::StatusCode::kInvalidArgument);
  t.ranks[1].layout.num_layers = std::numeric_limits<int64_t>::max() / 4;
  EXPECT_EQ(ValidateComplete(c, t, kVocab).code(), absl::StatusCode::kInvalidArgument);
  // Each rank's page 2^62 bytes: one fits (and is the wrong count), two overflow the sum.
  t.ranks[1].layout = stage1;
  PageLayout huge = stage1;
  huge.num_layers = int64_t{1} << 41;
  huge.num_kv_heads = int64_t{1} << 10;
  huge.head_dim = int64_t{1} << 4;
  ASSERT_EQ(huge.checked_page_bytes(), int64_t{1} << 62);
  t.ranks.push_back(t.ranks[1]);
  t.ranks[2].layout = huge;
  EXPECT_EQ(ValidateComplete(c, t, kVocab).code(), absl::StatusCode::kDataLoss);
  t.ranks.push_back(t.ranks[2]);
  EXPECT_EQ(ValidateComplete(c, t, kVocab).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace baton::transport
