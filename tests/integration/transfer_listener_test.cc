// Where a worker's KV-transfer listener listens (issue 25 §1): UCX's TCP transport used to
// listen on every interface of the host (eth0 as well as lo) whatever --host said, and a
// colocated worker, which takes no part in transfers, listened too. Now UCX listens only on
// the interface of --host (or --transfer-host), and a colocated worker opens no listener
// but its gRPC port. The listening sockets are read from /proc: the process's socket
// inodes, matched against /proc/net/tcp{,6} entries in state LISTEN.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/worker_proc.h"

namespace {

using baton::testing::RunToExit;
using baton::testing::WorkerProc;
using ::testing::HasSubstr;

// The local addresses (hex, as /proc/net/tcp* spells them) of `pid`'s listening sockets.
std::vector<std::string> ListeningAddresses(pid_t pid) {
  std::set<std::string> inodes;
  const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
  for (const auto& fd : std::filesystem::directory_iterator(fds)) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
    if (!ec && target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::vector<std::string> out;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode;
      if (state == "0A" && inodes.count(inode) > 0) out.push_back(local.substr(0, local.find(':')));
    }
  }
  return out;
}

// 127.0.0.0/8 in either table: "0100007F" (little-endian IPv4) or v4-mapped in IPv6, or ::1.
bool IsLoopback(const std::string& hex) {
  if (hex.size() == 8) return hex.substr(6, 2) == "7F";
  return hex == "0000000000000000FFFF00000100007F" ||
         (hex.substr(0, 24) == "0000000000000000FFFF0000" && hex.substr(30, 2) == "7F") ||
         hex == "00000000000000000000000001000000";
}

// An IPv4 address of this host outside 127.0.0.0/8, or "".
std::string NonLoopbackAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (const ifaddrs* i = list; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    const in_addr a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr;
    if ((ntohl(a.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, text, sizeof(text));
    found = text;
  }
  freeifaddrs(list);
  return found;
}

TEST(TransferListener, ADecodeWorkerOnLoopbackListensOnlyOnLoopback) {
  // Without the metrics port (on by default, a listener of its own on --host).
  WorkerProc decode({BATON_DECODE_BIN}, "tcp", {"--host", "127.0.0.1", "--metrics-port", "-1"});
  ASSERT_FALSE(decode.target.empty());
  const std::vector<std::string> listening = ListeningAddresses(decode.process->pid());
  EXPECT_GE(listening.size(), 2u) << "gRPC and UCX's TCP listener";
  for (const std::string& a : listening) EXPECT_TRUE(IsLoopback(a)) << "listening on " << a;
}

TEST(TransferListener, AColocatedWorkerListensOnlyForGrpc) {
  WorkerProc colocated({BATON_BIN, "worker"}, "tcp",
                       {"--host", "127.0.0.1", "--metrics-port", "-1"});
  ASSERT_FALSE(colocated.target.empty());
  const std::vector<std::string> listening = ListeningAddresses(colocated.process->pid());
  ASSERT_EQ(listening.size(), 1u);
  EXPECT_TRUE(IsLoopback(listening[0]));
}

TEST(TransferListener, TransferHostMovesOnlyTheTransferListener) {
  const std::string other = NonLoopbackAddress();
  if (other.empty()) GTEST_SKIP() << "this host has no IPv4 address outside 127.0.0.0/8";
  WorkerProc decode({BATON_DECODE_BIN}, "tcp",
                    {"--host", "127.0.0.1", "--transfer-host", other, "--metrics-port", "-1"});
  ASSERT_FALSE(decode.target.empty());
  int loopback = 0;
  int elsewhere = 0;
  for (const std::string& a : ListeningAddresses(decode.process->pid())) {
    ++(IsLoopback(a) ? loopback : elsewhere);
  }
  EXPECT_EQ(loopback, 1) << "gRPC";
  EXPECT_GE(elsewhere, 1) << "UCX on " << other;
}

TEST(TransferListener, ATransferHostThatIsNoInterfacesAddressIsRefused) {
  // 192.0.2.0/24 is TEST-NET-1; .250 is not this host's.
  const auto [code, err] = RunToExit(
      {BATON_DECODE_BIN, "--model", std::string(BATON_SOURCE_DIR) + "/models/baton-tiny", "--port",
       "0", "--kv-cache-memory", "16MiB", "--ucx-tls", "tcp", "--transfer-host", "192.0.2.250"});
  EXPECT_NE(code, 0);
  EXPECT_THAT(err, HasSubstr("--transfer-host '192.0.2.250' is not an address of any network"));
}

}  // namespace
