// The TCP group store for real, over loopback: ranks meet through it (a gloo group
// connects over it), a wrong or missing token is refused before anything is read or
// written, and malformed or oversized frames are refused with a message naming the bound.
#include "parallel/tcp_store.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "parallel/gloo_communicator.h"
#include "parallel/store_frame.h"

namespace baton::parallel {
namespace {

using std::chrono::milliseconds;
const std::string kToken = "0123456789abcdef-group-token";

std::unique_ptr<TcpStoreServer> Serve(TcpStoreServerOptions o = {}) {
  o.token = kToken;
  auto s = TcpStoreServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

std::string Leader(const TcpStoreServer& s) { return "127.0.0.1:" + std::to_string(s.port()); }

// A raw connection, to send what a well-behaved client never would.
int Dial(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  return fd;
}

// Sends `bytes` and reads one response frame; Unavailable when the server closed first.
absl::StatusOr<StoreResponse> Exchange(int fd, const std::string& bytes) {
  EXPECT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  char header[4];
  size_t got = 0;
  while (got < 4) {
    const ssize_t r = recv(fd, header + got, 4 - got, 0);
    if (r <= 0) return absl::UnavailableError("closed");
    got += static_cast<size_t>(r);
  }
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i)
    n |= static_cast<uint32_t>(static_cast<uint8_t>(header[i])) << (8 * i);
  std::string body(n, '\0');
  got = 0;
  while (got < n) {
    const ssize_t r = recv(fd, body.data() + got, n - got, 0);
    if (r <= 0) return absl::UnavailableError("closed");
    got += static_cast<size_t>(r);
  }
  return DecodeStoreResponse(body);
}

std::string Frame(const StoreRequest& r) {
  const std::string body = EncodeStoreRequest(r);
  return FrameHeader(body.size()) + body;
}

bool ClosedByPeer(int fd) {
  char c;
  return recv(fd, &c, 1, 0) == 0;
}

TEST(TcpStore, RanksSeeEachOthersValuesAndWaitForThem) {
  auto server = Serve();
  ASSERT_NE(server, nullptr);
  auto a = TcpStore::Connect(Leader(*server), kToken, milliseconds(5000));
  auto b = TcpStore::Connect(Leader(*server), kToken, milliseconds(5000));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*a)->local_address(), "127.0.0.1");
  // b waits for a key nobody has set yet; a sets it a little later.
  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(100));
    EXPECT_TRUE((*a)->Set("tp0/rank1", std::string("addr\0ess", 8)).ok());
  });
  absl::StatusOr<std::string> v = (*b)->Get("tp0/rank1", milliseconds(5000));
  later.join();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, std::string("addr\0ess", 8));
  // The leader's own in-process view is the same store.
  EXPECT_EQ(*server->Get("tp0/rank1", milliseconds(0)), *v);
  ASSERT_TRUE(server->Set("leader", "x").ok());
  EXPECT_EQ(*(*a)->Get("leader", milliseconds(100)), "x");
}

TEST(TcpStore, AGetOfAKeyNobodySetsEndsAtItsTimeout) {
  auto server = Serve();
  auto c = TcpStore::Connect(Leader(*server), kToken, milliseconds(5000));
  ASSERT_TRUE(c.ok());
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<std::string> v = (*c)->Get("never", milliseconds(200));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded) << v.status();
  EXPECT_NE(v.status().message().find("never"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(TcpStore, ARankMayStartBeforeItsLeader) {
  // Pick a free port, then start the leader on it after the rank began dialling.
  int port = 0;
  {
    auto probe = Serve();
    port = probe->port();
  }
  absl::StatusOr<std::unique_ptr<TcpStore>> c;
  std::thread rank([&] {
    c = TcpStore::Connect("127.0.0.1:" + std::to_string(port), kToken, milliseconds(10000));
  });
  std::this_thread::sleep_for(milliseconds(300));
  TcpStoreServerOptions o;
  o.port = port;
  auto server = Serve(o);
  rank.join();
  ASSERT_TRUE(c.ok()) << c.status();
}

TEST(TcpStore, NoLeaderIsADeadlineThatNamesTheFlag) {
  int port = 0;
  {
    auto probe = Serve();
    port = probe->port();
  }
  auto c = TcpStore::Connect("127.0.0.1:" + std::to_string(port), kToken, milliseconds(300));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(c.status().message().find("--group-leader"), std::string::npos) << c.status();
}

TEST(TcpStore, AWrongTokenIsRefusedAndSeesNothing) {
  auto server = Serve();
  ASSERT_TRUE(server->Set("secret", "value").ok());
  auto c = TcpStore::Connect(Leader(*server), "not-the-group-token!", milliseconds(2000));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnauthenticated) << c.status();
  EXPECT_NE(c.status().message().find("--internal-token-file"), std::string::npos);
  // A token that shares a prefix, and one of the right length.
  EXPECT_EQ(TcpStore::Connect(Leader(*server), kToken + "x", milliseconds(2000)).status().code(),
            absl::StatusCode::kUnauthenticated);
  std::string same_length = kToken;
  same_length.back() ^= 1;
  EXPECT_EQ(TcpStore::Connect(Leader(*server), same_length, milliseconds(2000)).status().code(),
            absl::StatusCode::kUnauthenticated);

  // Asking before presenting any token: refused, connection closed, nothing leaked.
  const int fd = Dial(server->port());
  StoreRequest get;
  get.op = StoreOp::kGet;
  get.key = "secret";
  absl::StatusOr<StoreResponse> r = Exchange(fd, Frame(get));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(r->payload.find("value"), std::string::npos);
  EXPECT_TRUE(ClosedByPeer(fd));
  close(fd);
  EXPECT_EQ(server->refused(), 4);
  // Setting without a token changed nothing.
  const int fd2 = Dial(server->port());
  StoreRequest set;
  set.op = StoreOp::kSet;
  set.key = "secret";
  set.value = "overwritten";
  EXPECT_EQ(Exchange(fd2, Frame(set))->code, absl::StatusCode::kUnauthenticated);
  close(fd2);
  EXPECT_EQ(*server->Get("secret", milliseconds(0)), "value");
}

TEST(TcpStore, ASilentConnectionIsCutAtTheHelloTimeout) {
  TcpStoreServerOptions o;
  o.hello_timeout = milliseconds(200);
  auto server = Serve(o);
  const int fd = Dial(server->port());
  const auto t0 = std::chrono::steady_clock::now();
  char header[4];
  ssize_t got = recv(fd, header, 4, MSG_WAITALL);  // the refusal, then the close
  EXPECT_EQ(got, 4);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  close(fd);
}

TEST(TcpStore, MalformedAndOversizedFramesAreRefusedWithTheBound) {
  auto server = Serve();
  StoreRequest hello;
  hello.op = StoreOp::kHello;
  hello.token = kToken;
  {
    // A length past the limit: refused before the server allocates it.
    const int fd = Dial(server->port());
    ASSERT_EQ(Exchange(fd, Frame(hello))->code, absl::StatusCode::kOk);
    absl::StatusOr<StoreResponse> r = Exchange(fd, FrameHeader(0xfffffff0u));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->code, absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r->payload.find(std::to_string(StoreFrameLimits::kMaxFrameBytes)), std::string::npos)
        << r->payload;
    EXPECT_TRUE(ClosedByPeer(fd));
    close(fd);
  }
  {
    // An unknown op.
    const int fd = Dial(server->port());
    ASSERT_EQ(Exchange(fd, Frame(hello))->code, absl::StatusCode::kOk);
    absl::StatusOr<StoreResponse> r = Exchange(fd, FrameHeader(1) + "\x09");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->code, absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r->payload.find("op 9"), std::string::npos) << r->payload;
    close(fd);
  }
  {
    // A key past its bound.
    auto c = TcpStore::Connect(Leader(*server), kToken, milliseconds(2000));
    ASSERT_TRUE(c.ok());
    absl::Status s = (*c)->Set(std::string(StoreFrameLimits::kMaxKeyBytes + 1, 'k'), "v");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
}

TEST(TcpStore, KeysAndBytesAreBounded) {
  TcpStoreServerOptions o;
  o.max_keys = 3;
  o.max_total_bytes = 64;
  auto server = Serve(o);
  auto c = TcpStore::Connect(Leader(*server), kToken, milliseconds(2000));
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE((*c)->Set("a", "1").ok());
  EXPECT_TRUE((*c)->Set("b", "2").ok());
  EXPECT_TRUE((*c)->Set("c", "3").ok());
  absl::Status s = (*c)->Set("d", "4");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("limit is 3"), std::string::npos) << s;
  s = (*c)->Set("a", std::string(100, 'x'));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE((*c)->Set("a", "11").ok());  // overwriting within the bounds
  EXPECT_EQ(*(*c)->Get("a", milliseconds(0)), "11");
}

TEST(TcpStore, ConnectionsAreBounded) {
  TcpStoreServerOptions o;
  o.max_connections = 2;
  auto server = Serve(o);
  auto a = TcpStore::Connect(Leader(*server), kToken, milliseconds(2000));
  auto b = TcpStore::Connect(Leader(*server), kToken, milliseconds(2000));
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = TcpStore::Connect(Leader(*server), kToken, milliseconds(2000));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted) << c.status();
}

TEST(TcpStore, AShortTokenIsRefusedAtStart) {
  TcpStoreServerOptions o;
  o.token = "short";
  auto s = TcpStoreServer::Start(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("--internal-token-file"), std::string::npos);
}

TEST(TcpStore, SplitHostPortNamesTheFlag) {
  std::string host;
  int port = 0;
  ASSERT_TRUE(SplitHostPort("10.0.0.5:29500", "--group-leader", &host, &port).ok());
  EXPECT_EQ(host, "10.0.0.5");
  EXPECT_EQ(port, 29500);
  ASSERT_TRUE(SplitHostPort("[::1]:7", "--group-leader", &host, &port).ok());
  EXPECT_EQ(host, "::1");
  for (const char* bad : {"host", ":1", "host:", "host:99999", "host:1x"}) {
    absl::Status s = SplitHostPort(bad, "--group-leader", &host, &port);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("--group-leader"), std::string::npos);
  }
}

// The store's purpose: a gloo group meets through it, each rank with its own connection.
TEST(TcpStore, AGlooGroupConnectsThroughIt) {
  auto server = Serve();
  constexpr int kRanks = 3;
  std::vector<absl::Status> results(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<TcpStore> client;
      Store* store = server.get();  // rank 0 is the leader: it uses the store in process
      if (r > 0) {
        auto c = TcpStore::Connect(Leader(*server), kToken, milliseconds(5000));
        if (!c.ok()) {
          results[r] = c.status();
          return;
        }
        client = *std::move(c);
        store = client.get();
      }
      GlooOptions o;
      o.rank = r;
      o.size = kRanks;
      o.store = store;
      o.timeout = milliseconds(10000);
      auto comm = ConnectGloo(o);
      if (!comm.ok()) {
        results[r] = comm.status();
        return;
      }
      std::vector<float> v(4, static_cast<float>(r + 1));
      results[r] = (*comm)->AllReduceSum(std::span<float>(v));
      if (results[r].ok() && v[0] != 6.0f) results[r] = absl::InternalError("wrong sum");
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r)
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
}

}  // namespace
}  // namespace baton::parallel
