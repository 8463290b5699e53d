// The other process of transport_ucx_transfer_test: a receiver that registers a buffer,
// prints how to reach it, and checks what a sender wrote.
//
//   transport_ucx_peer TRANSPORTS BYTES SEED
// prints one line "<address hex> <rkey hex> <base>", then waits for a line on stdin and
// answers "ok" when the buffer holds Pattern(SEED), else "bad <first wrong offset>".
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "tests/unit/transport/ucx_test_util.h"
#include "transport/registered_region.h"
#include "transport/ucx_worker.h"

int main(int argc, char** argv) {
  using namespace baton::transport;
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s TRANSPORTS BYTES SEED\n", argv[0]);
    return 2;
  }
  const size_t bytes = std::strtoull(argv[2], nullptr, 10);
  const uint64_t seed = std::strtoull(argv[3], nullptr, 10);
  auto ucx = UcxWorker::Create({.transports = argv[1]});
  if (!ucx.ok()) {
    std::fprintf(stderr, "%s\n", std::string(ucx.status().message()).c_str());
    return 1;
  }
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
