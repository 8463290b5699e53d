// A decode worker's reservations are bounded per caller (issue 25 §1): a member of the
// cluster that reserves pages without ever sending K/V (a runaway or hostile prefill worker,
// which holds the cluster token) gets RESOURCE_EXHAUSTED naming the flag once it holds its
// share of the pool, and another caller still gets pages. Before the bound, nine such calls
// filled a small pool and real requests got 429.
//
// Two callers on one host are told apart by address: the worker listens on every address
// (`--host ::`, allowed with a token), one caller dials 127.0.0.1 and the other ::1.
#include <chrono>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "baton/internal/v1/kv_transfer.grpc.pb.h"
#include "baton/internal/v1/worker.grpc.pb.h"
#include "common/strings.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kvcache/page_layout.h"
#include "service/internal_auth.h"
#include "tests/unit/transport/ucx_test_util.h"
#include "worker/transfer_ticket_proto.h"

namespace baton::testing {
namespace {

namespace ipb = ::baton::internal::v1;
using ::testing::HasSubstr;

constexpr char kToken[] = "reservation-bound-test-token-0123456789";

struct Caller {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<ipb::KvTransfer::Stub> transfer;
  std::unique_ptr<ipb::Worker::Stub> worker;
  explicit Caller(const std::string& target)
      : channel(service::InternalAuth::WithToken(kToken)->Channel(target)),
        transfer(ipb::KvTransfer::NewStub(channel)),
        worker(ipb::Worker::NewStub(channel)) {}

  ipb::PageLayout layout;  // the decode worker's own: a prefill worker of the same model's

  grpc::Status Reserve(const std::string& id, int prompt_tokens, ipb::TransferTicket* ticket) {
    ipb::ReserveRequest req;
    req.set_request_id(id);
    *req.mutable_sender_layout() = layout;
    // Distinct prompts: no reservation shares a cached block with another.
    for (int i = 0; i < prompt_tokens; ++i) req.add_prompt_ids(5 + (i * 31 + id.size() * 7) % 1000);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return transfer->Reserve(&ctx, req, ticket);
  }
  void Release(const std::string& id) {
    ipb::ReleaseRequest req;
    req.set_request_id(id);
    ipb::ReleaseResponse out;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    EXPECT_TRUE(transfer->Release(&ctx, req, &out).ok());
  }
  ipb::GetStatsResponse Stats() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ipb::GetStatsResponse out;
    EXPECT_TRUE(worker->GetStats(&ctx, {}, &out).ok());
    return out;
  }
};

TEST(ReservationBound, OneCallerHoldsAtMostItsShareAndAnotherStillGetsPages) {
  const std::string token_file = ::testing::TempDir() + "/reservation_bound.token";
  std::ofstream(token_file) << kToken;
  ChildProcess decode(
      {BATON_DECODE_BIN, "--model", std::string(BATON_SOURCE_DIR) + "/models/baton-tiny", "--host",
       "::", "--port", "0", "--threads", "1", "--kv-cache-memory", "16MiB", "--ucx-tls", "tcp",
       "--internal-token-file", token_file, "--max-reserved-share-per-caller", "0.5"});
  const std::string banner = decode.ReadLine();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      banner, m, std::regex(R"(on \[::\]:(\d+) \(\d+ (\w+) KV pages of (\d+) tokens)")))
      << banner;
  const std::string port = m[1].str();
  Caller a("127.0.0.1:" + port), b("[::1]:" + port);
  // models/baton-tiny/config.json: 6 layers, 2 KV heads of 32.
  kvcache::PageLayout layout{.num_layers = 6,
                             .num_kv_heads = 2,
                             .head_dim = 32,
                             .block_size = std::stoi(m[3].str()),
                             .dtype = m[2].str()};
  a.layout = b.layout = worker::ToProto(layout);

  const int64_t pool = a.Stats().pages_total();
  ASSERT_GT(pool, 0);
  std::vector<std::string> held;
  grpc::Status refused;
  for (int i = 0; i < 1000 && refused.ok(); ++i) {
    ipb::TransferTicket t;
    const std::string id = StrCat("a-", i);
    refused = a.Reserve(id, 100, &t);
    if (refused.ok()) held.push_back(id);
  }
  ASSERT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("--max-reserved-share-per-caller"));
  const ipb::GetStatsResponse full = a.Stats();
  EXPECT_LE(full.kv_pages_reserved(), pool / 2) << "one caller held more than its half";
  EXPECT_GT(full.kv_pages_reserved(), pool / 4) << "the bound refused far below the share";

  // Another caller is not locked out by the first one's reservations.
  ipb::TransferTicket t;
  grpc::Status other = b.Reserve("b-0", 100, &t);
  EXPECT_TRUE(other.ok()) << other.error_message();
  EXPECT_GT(t.page_ids_size(), 0);

  // Released, the first caller's share is its own again.
  for (const std::string& id : held) a.Release(id);
  EXPECT_TRUE(a.Reserve("a-again", 100, &t).ok());
  a.Release("a-again");
  b.Release("b-0");
  EXPECT_EQ(a.Stats().kv_pages_reserved(), 0);
}

}  // namespace
}  // namespace baton::testing
