#include "worker/transfer_ticket_proto.h"

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "baton/internal/v1/kv_transfer.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transport/transfer_ticket.h"

namespace baton::worker {
namespace {

namespace pb = ::baton::internal::v1;
using kvcache::PageLayout;
using ::testing::HasSubstr;
using transport::TicketLimits;
using transport::TransferComplete;
using transport::TransferTicket;

PageLayout Layout() {
  PageLayout l;
  l.num_layers = 2;
  l.num_kv_heads = 4;
  l.head_dim = 4;
  l.block_size = 16;
  l.dtype = "f32";
  l.tp_rank = 1;
  l.tp_size = 2;
  // A slice of a group: the second stage's layers, the second rank's heads.
  l.first_layer = 2;
  l.first_kv_head = 4;
  l.pp_rank = 1;
  l.pp_size = 2;
  return l;
}

TransferTicket Ticket() {
  TransferTicket t;
  t.request_id = "req-7";
  t.worker_address = std::string("\x00\x01\x02\xff", 4);
  t.rkey = std::string("\xde\xad\x00\xbe\xef", 5);
  t.pool_base = 0xfedcba9876543210;
  t.layout = Layout();
  t.pool_bytes = 512 * 4096;
  t.prompt_tokens = 40;
  t.first_block = 1;
  t.page_ids = {7, 3};
  t.cached_block_hashes = {std::string(32, '\0')};
  t.lease_deadline_unix_ms = 1'700'000'060'000;
  return t;
}

TransferComplete Complete() {
  TransferComplete c;
  c.request_id = "req-7";
  c.first_token = 42;
  c.blocks_written = 2;
  c.bytes_written = 8192;
  c.checksum = 0xffffffffffffffff;
  return c;
}

void ExpectSameTicket(const TransferTicket& a, const TransferTicket& b) {
  EXPECT_EQ(a.request_id, b.request_id);
  EXPECT_EQ(a.worker_address, b.worker_address);
  EXPECT_EQ(a.rkey, b.rkey);
  EXPECT_EQ(a.pool_base, b.pool_base);
  EXPECT_EQ(a.pool_bytes, b.pool_bytes);
  EXPECT_EQ(a.layout, b.layout);
  EXPECT_EQ(a.prompt_tokens, b.prompt_tokens);
  EXPECT_EQ(a.first_block, b.first_block);
  EXPECT_EQ(a.page_ids, b.page_ids);
  EXPECT_EQ(a.cached_block_hashes, b.cached_block_hashes);
  EXPECT_EQ(a.lease_deadline_unix_ms, b.lease_deadline_unix_ms);
}

TEST(TransferTicketProtoTest, LayoutRoundTrips) {
  const pb::PageLayout wire = ToProto(Layout());
  EXPECT_EQ(wire.dtype(), "f32");
  EXPECT_EQ(wire.page_bytes(), 4096);
  absl::StatusOr<PageLayout> back = FromProto(wire);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, Layout());
}

TEST(TransferTicketProtoTest, AWirePageSizeThatIsNotTheProductIsRefused) {
  pb::PageLayout wire = ToProto(Layout());
  wire.set_page_bytes(4095);
  absl::StatusOr<PageLayout> back = FromProto(wire);
  EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(back.status().message().find("page_bytes is 4095"), std::string::npos);
  EXPECT_NE(back.status().message().find("is 4096"), std::string::npos) << back.status();
  pb::TransferTicket t = ToProto(Ticket());
  t.mutable_layout()->set_page_bytes(8192);
  absl::StatusOr<TransferTicket> ticket = FromProto(t, TicketLimits{});
  EXPECT_EQ(ticket.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ticket.status().message().find("ticket.layout.page_bytes is 8192"), std::string::npos)
      << ticket.status();
}

// A peer whose pages order their elements otherwise (a Baton before head-major pages sends
// no order) is refused by name: its bytes would arrive intact and mean something else.
TEST(TransferTicketProtoTest, APageOrderThatIsNotOursIsRefused) {
  for (const int order : {0, 7}) {
    pb::PageLayout wire = ToProto(Layout());
    EXPECT_EQ(wire.page_order(), pb::PAGE_ORDER_HEAD_MAJOR);
    wire.set_page_order(static_cast<pb::PageOrder>(order));
    const absl::Status s = FromProto(wire).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find(order == 0 ? "page_order is 0 (PAGE_ORDER_UNSPECIFIED)"
                                          : "page_order is 7 (unknown)"),
              std::string::npos)
        << s;
    EXPECT_NE(s.message().find("same Baton version"), std::string::npos) << s;
  }
  pb::TransferTicket t = ToProto(Ticket());
  t.mutable_layout()->clear_page_order();
  const absl::Status s = FromProto(t, TicketLimits{}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("TransferTicket.layout.page_order"), std::string::npos) << s;
}

TEST(TransferTicketProtoTest, TicketRoundTripsThroughBytes) {
  const TransferTicket t = Ticket();
  std::string bytes;
  ASSERT_TRUE(ToProto(t).SerializeToString(&bytes));
  pb::TransferTicket wire;
  ASSERT_TRUE(wire.ParseFromString(bytes));
  EXPECT_EQ(wire.page_ids_size(), 2);
  absl::StatusOr<TransferTicket> back = FromProto(wire, TicketLimits{});
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameTicket(*back, t);
  EXPECT_TRUE(transport::ValidateTicket(*back, Layout(), TicketLimits{},
                                        absl::FromUnixMillis(1'700'000'000'000))
                  .ok());
}

TEST(TransferTicketProtoTest, ToProtoOverwrites) {
  pb::TransferTicket wire;
  wire.add_page_ids(99);
  wire.add_cached_block_hashes("stale");
  ToProto(Ticket(), &wire);
  EXPECT_EQ(wire.page_ids_size(), 2);
  EXPECT_EQ(wire.cached_block_hashes_size(), 1);

  pb::TransferComplete complete;
  complete.set_checksum(1);
  TransferComplete empty;
  ToProto(empty, &complete);
  EXPECT_EQ(complete.checksum(), 0u);
}

TEST(TransferTicketProtoTest, EmptyTicketRoundTrips) {
  // FromProto bounds sizes and refuses a page order not its own (an empty message has
  // none); the rest of the contract is ValidateTicket's.
  EXPECT_EQ(FromProto(pb::TransferTicket{}, TicketLimits{}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  pb::TransferTicket empty;
  empty.mutable_layout()->set_page_order(pb::PAGE_ORDER_HEAD_MAJOR);
  absl::StatusOr<TransferTicket> back = FromProto(empty, TicketLimits{});
  ASSERT_TRUE(back.ok()) << back.status();
  TransferTicket want;
  want.layout = PageLayout{};  // the proto's defaults, unlike the struct's
  want.layout.block_size = 0;
  want.layout.dtype = "";
  want.layout.tp_size = 0;
  want.layout.pp_size = 0;
  ExpectSameTicket(*back, want);
  EXPECT_FALSE(transport::ValidateTicket(*back, Layout(), TicketLimits{}, absl::UnixEpoch()).ok());
}

TEST(TransferTicketProtoTest, CompleteRoundTrips) {
  std::string bytes;
  ASSERT_TRUE(ToProto(Complete()).SerializeToString(&bytes));
  pb::TransferComplete wire;
  ASSERT_TRUE(wire.ParseFromString(bytes));
  absl::StatusOr<TransferComplete> back = FromProto(wire, TicketLimits{});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->request_id, "req-7");
  EXPECT_EQ(back->first_token, 42);
  EXPECT_EQ(back->blocks_written, 2);
  EXPECT_EQ(back->bytes_written, 8192u);
  EXPECT_EQ(back->checksum, 0xffffffffffffffffu);
  EXPECT_TRUE(transport::ValidateComplete(*back, Ticket(), 1000).ok());
}

// ---- Rejections ----

struct RejectCase {
  std::string name;
  std::function<void(pb::TransferTicket*)> mutate;
  std::vector<std::string> substrs;  // empty: accepted
};

std::ostream& operator<<(std::ostream& os, const RejectCase& c) { return os << c.name; }

class TicketRejectTest : public ::testing::TestWithParam<RejectCase> {};

// Small limits, so that the count bounds are cheap to cross.
TicketLimits SmallLimits() {
  TicketLimits limits;
  limits.max_request_id_bytes = 8;
  limits.max_worker_address_bytes = 16;
  limits.max_rkey_bytes = 16;
  limits.max_prompt_tokens = 4;
  return limits;
}

TEST_P(TicketRejectTest, FromProto) {
  const RejectCase& c = GetParam();
  pb::TransferTicket wire = ToProto(Ticket());
  c.mutate(&wire);
  absl::StatusOr<TransferTicket> got = FromProto(wire, SmallLimits());
  if (c.substrs.empty()) {
    EXPECT_TRUE(got.ok()) << got.status();
    return;
  }
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  for (const std::string& sub : c.substrs) {
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(sub));
  }
}

const RejectCase kRejectCases[] = {
    {"RequestIdAtLimit", [](pb::TransferTicket* t) { t->set_request_id(std::string(8, 'r')); }, {}},
    {"RequestIdTooLong",
     [](pb::TransferTicket* t) { t->set_request_id(std::string(9, 'r')); },
     {"TransferTicket.request_id is 9 bytes", "limit is 8"}},
    {"WorkerAddressAtLimit",
     [](pb::TransferTicket* t) { t->set_worker_address(std::string(16, 'a')); },
     {}},
    {"WorkerAddressTooLong",
     [](pb::TransferTicket* t) { t->set_worker_address(std::string(17, 'a')); },
     {"TransferTicket.worker_address is 17 bytes", "limit is 16"}},
    {"RkeyTooLong",
     [](pb::TransferTicket* t) { t->set_rkey(std::string(17, 'k')); },
     {"TransferTicket.rkey is 17 bytes", "limit is 16"}},
    {"DtypeAtLimit",
     [](pb::TransferTicket* t) { t->mutable_layout()->set_dtype(std::string(16, 'd')); },
     {}},
    {"DtypeTooLong",
     [](pb::TransferTicket* t) { t->mutable_layout()->set_dtype(std::string(17, 'd')); },
     {"TransferTicket.layout.dtype is 17 bytes", "limit is 16"}},
    {"PageIdsAtLimit",
     [](pb::TransferTicket* t) {
       for (int i = 0; i < 2; ++i) t->add_page_ids(i);
     },
     {}},
    {"PageIdsTooMany",
     [](pb::TransferTicket* t) {
       for (int i = 0; i < 3; ++i) t->add_page_ids(i);
     },
     {"TransferTicket.page_ids has 5 entries", "limit is 4"}},
    {"HashesAtLimit",
     [](pb::TransferTicket* t) {
       for (int i = 0; i < 3; ++i) t->add_cached_block_hashes(std::string(32, 'h'));
     },
     {}},
    {"HashesTooMany",
     [](pb::TransferTicket* t) {
       for (int i = 0; i < 4; ++i) t->add_cached_block_hashes(std::string(32, 'h'));
     },
     {"TransferTicket.cached_block_hashes has 5 entries", "limit is 4"}},
    {"HashTooLong",
     [](pb::TransferTicket* t) { t->add_cached_block_hashes(std::string(33, 'h')); },
     {"TransferTicket.cached_block_hashes[1] is 33 bytes", "limit is 32"}},
    {"HashShortIsLeftToValidate",
     [](pb::TransferTicket* t) { t->set_cached_block_hashes(0, "short"); },
     {}},
};

INSTANTIATE_TEST_SUITE_P(Bounds, TicketRejectTest, ::testing::ValuesIn(kRejectCases),
                         [](const ::testing::TestParamInfo<RejectCase>& info) {
                           return info.param.name;
                         });

TEST(TransferTicketProtoTest, HugePageIdListIsRefusedUnderDefaultLimits) {
  pb::TransferTicket wire = ToProto(Ticket());
  wire.mutable_page_ids()->Resize((1 << 20) + 1, 0);
  absl::StatusOr<TransferTicket> got = FromProto(wire, TicketLimits{});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("TransferTicket.page_ids has 1048577 entries; the limit is 1048576"));
}

TEST(TransferTicketProtoTest, LayoutDtypeTooLong) {
  pb::PageLayout wire = ToProto(Layout());
  wire.set_dtype(std::string(kMaxDtypeBytes + 1, 'x'));
  absl::StatusOr<PageLayout> got = FromProto(wire);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("PageLayout.dtype is 17 bytes"));
}

TEST(TransferTicketProtoTest, CompleteRequestIdTooLong) {
  pb::TransferComplete wire = ToProto(Complete());
  wire.set_request_id(std::string(9, 'r'));
  absl::StatusOr<TransferComplete> got = FromProto(wire, SmallLimits());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("TransferComplete.request_id is 9 bytes; the limit is 8"));
  wire.set_request_id(std::string(8, 'r'));
  EXPECT_TRUE(FromProto(wire, SmallLimits()).ok());
}

}  // namespace
}  // namespace baton::worker
