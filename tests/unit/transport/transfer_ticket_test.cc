#include "transport/transfer_ticket.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

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
     {"dtype bf16 (receiver) vs f32 (this worker)"}},
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

}  // namespace
}  // namespace baton::transport
