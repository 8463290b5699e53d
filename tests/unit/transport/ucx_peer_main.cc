// The other process of transport_ucx_transfer_test: a receiver that registers a buffer,
// prints how to reach it, and checks what a sender wrote; or a sender that writes into the
// test's buffer until it is killed.
//
//   transport_ucx_peer TRANSPORTS BYTES SEED
// prints one line "<address hex> <rkey hex> <base>", then waits for a line on stdin and
// answers "ok" when the buffer holds Pattern(SEED), else "bad <first wrong offset>".
//
//   transport_ucx_peer TRANSPORTS BYTES SEED send <address hex> <rkey hex> <base> CHUNK
// connects, prints "sending" once its first puts have landed, and goes on putting
// Pattern(SEED) in puts of CHUNK bytes with a flush after every 16, until it is killed.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "tests/unit/transport/ucx_test_util.h"
#include "transport/registered_region.h"
#include "transport/ucx_endpoint.h"
#include "transport/ucx_worker.h"

namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
  return 1;
}

int Send(baton::transport::UcxWorker& ucx, size_t bytes, uint64_t seed, char** where) {
  auto ep = baton::transport::UcxEndpoint::Connect(ucx, baton::testing::Unhex(where[0]));
  if (!ep.ok()) return Fail(ep.status());
  auto remote = (*ep)->ImportRegion(baton::testing::Unhex(where[1]),
                                    std::strtoull(where[2], nullptr, 10), bytes);
  if (!remote.ok()) return Fail(remote.status());
  const std::vector<uint8_t> data = baton::testing::Pattern(bytes, seed);
  const size_t chunk = std::max<size_t>(1, std::strtoull(where[3], nullptr, 10));
  for (uint64_t round = 0;; ++round) {
    for (size_t off = 0; off < bytes; off += chunk) {
      const size_t n = std::min(chunk, bytes - off);
      absl::Status s = (*ep)->Put(data.data() + off, n, **remote, off);
      if (s.ok() && (off / chunk) % 16 == 15) s = (*ep)->Flush(absl::Now() + absl::Seconds(20));
      if (!s.ok()) return Fail(s);
    }
    if (round == 0) std::cout << "sending" << std::endl;
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace baton::transport;
  const bool send = argc == 9 && std::string(argv[4]) == "send";
  if (argc != 4 && !send) {
    std::fprintf(stderr, "usage: %s TRANSPORTS BYTES SEED [send ADDRESS_HEX RKEY_HEX BASE CHUNK]\n",
                 argv[0]);
    return 2;
  }
  const size_t bytes = std::strtoull(argv[2], nullptr, 10);
  const uint64_t seed = std::strtoull(argv[3], nullptr, 10);
  auto ucx = UcxWorker::Create({.transports = argv[1]});
  if (!ucx.ok()) return Fail(ucx.status());
  if (send) return Send(**ucx, bytes, seed, argv + 5);
  std::vector<uint8_t> buffer(bytes, 0);
  auto region = RegisteredRegion::Register(**ucx, buffer.data(), buffer.size());
  if (!region.ok()) {
    std::fprintf(stderr, "%s\n", std::string(region.status().message()).c_str());
    return 1;
  }
  std::cout << baton::testing::Hex((*ucx)->address()) << " "
            << baton::testing::Hex((*region)->packed_rkey()) << " " << (*region)->base()
            << std::endl;
  std::string line;
  if (!std::getline(std::cin, line)) return 1;
  const std::vector<uint8_t> want = baton::testing::Pattern(bytes, seed);
  for (size_t i = 0; i < bytes; ++i) {
    if (buffer[i] != want[i]) {
      std::cout << "bad " << i << std::endl;
      return 1;
    }
  }
  std::cout << "ok" << std::endl;
  return 0;
}
