// A decode rank's check of a sliced transfer (worker::VerifySliceSums): the checksums each
// sender rank computed over what it wrote are recomputed over this rank's pages. Pages
// holding what was sent pass; one changed byte in a sent run is DataLoss naming the pair;
// every bound on what the leader passes (pages, ranks, counts, layouts) is a clean error.
#include <cstdint>
#include <random>
#include <vector>

#include "baton/internal/v1/rank_kv.pb.h"
#include "gtest/gtest.h"
#include "kvcache/kv_checksum.h"
#include "worker/rank_kv.h"
#include "worker/transfer_ticket_proto.h"

namespace baton::worker {
namespace {

namespace pb = ::baton::internal::v1;
using kvcache::PageLayout;

PageLayout Whole() {
  PageLayout l;
  l.num_layers = 2;
  l.num_kv_heads = 4;
  l.head_dim = 4;
  l.block_size = 4;
  return l;
}

PageLayout Half(int r) {
  PageLayout l = Whole();
  l.num_kv_heads = 2;
  l.first_kv_head = 2 * r;
  l.tp_rank = r;
  l.tp_size = 2;
  return l;
}

constexpr int64_t kPages = 6;

struct Fixture {
  PageLayout local = Whole();
  std::vector<float> pool = std::vector<float>(kPages * Whole().elements_per_block());
  pb::VerifySlices verify;

  Fixture() {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1, 1);
    for (float& x : pool) x = u(rng);
    // A 14-token prompt from block 1: pages 4, 0 and 2 (the last one partial).
    verify.add_page_ids(4);
    verify.add_page_ids(0);
    verify.add_page_ids(2);
    verify.set_first_block(1);
    verify.set_prompt_tokens(14);
    const std::vector<int32_t> pages(verify.page_ids().begin(), verify.page_ids().end());
    for (int s = 0; s < 2; ++s) {
      ToProto(Half(s), verify.add_sender_ranks());
      // What sender rank s would report had its bytes arrived as they are in `pool`.
      const kvcache::KvChecksum sum = kvcache::SliceKvChecksum(
          pool.data(), Half(s), local, kvcache::SliceSide::kDestination, pages, 1, 14);
      ToProto(transport::SliceSum{s, 0, sum.hash, sum.bytes}, verify.add_expected());
    }
  }
  absl::Status Run() const { return VerifySliceSums(pool.data(), kPages, local, 0, verify); }
};

TEST(VerifySliceSums, PagesHoldingWhatWasSentPass) {
  Fixture f;
  EXPECT_TRUE(f.Run().ok()) << f.Run();
  // Entries for another rank are that rank's to check.
  f.verify.mutable_expected(0)->set_receiver_rank(1);
  f.verify.mutable_expected(0)->set_checksum(0);
  EXPECT_TRUE(f.Run().ok());
}

TEST(VerifySliceSums, AChangedByteIsDataLossNamingThePair) {
  Fixture f;
  // Page 0 is the prompt's block 2, full: its first element is layer 0, K, position 0,
  // head 0, which sender rank 0 wrote.
  f.pool[0 * Whole().elements_per_block()] += 1.0f;
  const absl::Status s = f.Run();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("sender rank 0 wrote into rank 0"), std::string::npos) << s;
}

TEST(VerifySliceSums, AByteNobodySentIsNotChecked) {
  Fixture f;
  // Page 2 holds block 3: positions 12, 13 of a 14-token prompt; position 3 is unfilled.
  f.pool[2 * Whole().elements_per_block() + Whole().element_offset(0, 0, 0, 3)] += 1.0f;
  EXPECT_TRUE(f.Run().ok());
}

TEST(VerifySliceSums, BoundsAreCleanErrors) {
  {
    Fixture f;
    f.verify.set_page_ids(1, static_cast<int32_t>(kPages));
    EXPECT_EQ(f.Run().code(), absl::StatusCode::kInvalidArgument) << f.Run();
  }
  {
    Fixture f;
    f.verify.add_page_ids(1);  // one page more than the prompt's blocks
    EXPECT_EQ(f.Run().code(), absl::StatusCode::kInvalidArgument) << f.Run();
  }
  {
    Fixture f;
    f.verify.mutable_expected(1)->set_sender_rank(2);
    EXPECT_EQ(f.Run().code(), absl::StatusCode::kInvalidArgument) << f.Run();
  }
  {
    Fixture f;
    f.verify.set_prompt_tokens(0);
    EXPECT_EQ(f.Run().code(), absl::StatusCode::kInvalidArgument) << f.Run();
  }
  {
    Fixture f;  // one sender slice alone does not fill this rank
    f.verify.mutable_sender_ranks()->RemoveLast();
    f.verify.mutable_expected()->RemoveLast();
    EXPECT_EQ(f.Run().code(), absl::StatusCode::kFailedPrecondition) << f.Run();
  }
  {
    Fixture f;  // another model's pages
    f.verify.mutable_sender_ranks(0)->set_head_dim(8);
    f.verify.mutable_sender_ranks(0)->set_page_bytes(0);
    EXPECT_FALSE(f.Run().ok());
  }
}

// The sums cover each element's own bytes, whatever the pages' element type: on bf16
// pages (the engine's default) the checked bytes are half those of f32 pages, and a change
// to the last byte a sender wrote into a page is caught on both.
TEST(VerifySliceSums, Bf16PagesAreCheckedByTheirOwnBytes) {
  uint64_t checked[2] = {0, 0};
  const char* dtypes[2] = {"f32", "bf16"};
  for (int d = 0; d < 2; ++d) {
    SCOPED_TRACE(dtypes[d]);
    PageLayout local = Whole();
    local.dtype = dtypes[d];
    std::vector<uint8_t> pool(static_cast<size_t>(kPages * local.page_bytes()));
    std::mt19937 rng(11);
    for (uint8_t& b : pool) b = static_cast<uint8_t>(rng());
    pb::VerifySlices verify;
    for (int32_t id : {4, 0, 2}) verify.add_page_ids(id);
    verify.set_first_block(1);
    verify.set_prompt_tokens(14);
    const std::vector<int32_t> pages = {4, 0, 2};
    for (int s = 0; s < 2; ++s) {
      PageLayout sender = Half(s);
      sender.dtype = dtypes[d];
      ToProto(sender, verify.add_sender_ranks());
      const kvcache::KvChecksum sum = kvcache::SliceKvChecksum(
          pool.data(), sender, local, kvcache::SliceSide::kDestination, pages, 1, 14);
      ToProto(transport::SliceSum{s, 0, sum.hash, sum.bytes}, verify.add_expected());
      checked[d] += sum.bytes;
    }
    EXPECT_TRUE(VerifySliceSums(pool.data(), kPages, local, 0, verify).ok());
    // Page 0 (block 2, full): its last element is layer 1, head 3 (sender rank 1's), V,
    // position 3, dim 3.
    const int64_t last = local.element_offset(1, 3, 1, 3) + 3;
    ASSERT_EQ((last + 1) * kvcache::DtypeBytes(local.dtype), local.page_bytes());
    pool[static_cast<size_t>(local.page_bytes() - 1)] ^= 1;
    const absl::Status s = VerifySliceSums(pool.data(), kPages, local, 0, verify);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_NE(s.message().find("sender rank 1 wrote into rank 0"), std::string::npos) << s;
  }
  EXPECT_EQ(checked[1] * 2, checked[0]);
}

}  // namespace
}  // namespace baton::worker
