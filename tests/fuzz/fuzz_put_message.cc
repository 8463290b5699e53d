// Fuzzes the receiver's check of messaged puts (transport/put_message.h): each message is a
// header as a peer sends it (any bytes, any length) and a payload length. A plain model is
// the oracle: a message writes exactly when its key names a region and its bytes fit, and
// then exactly there; every other byte of both regions, and the guard bytes around them,
// stays as it was.
//
// The input is also parsed as a region key (ParseRegionKey), which must round-trip.
//
// Input: 1 byte of header length (0-31), that many header bytes (a key byte of 0-3 picks
// one of the two real keys, 0 or a stray key; the rest is taken as is), 2 bytes of payload
// length; repeated.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "transport/put_message.h"

namespace {

using baton::transport::PutMessageHeader;
using baton::transport::PutTargets;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

constexpr size_t kGuard = 64;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The same bytes as a region key (the other parser of this protocol): a key that parses
  // packs back to the same bytes.
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (auto key = baton::transport::ParseRegionKey(bytes); key.ok()) {
    Check(baton::transport::PackRegionKey(*key) == bytes);
  }
  PutTargets targets;
  // Two regions inside one buffer, with guard bytes before, between and after.
  const size_t sizes[2] = {100, 4096};
  std::vector<std::byte> memory(kGuard + sizes[0] + kGuard + sizes[1] + kGuard, std::byte{0});
  std::byte* bases[2] = {memory.data() + kGuard, memory.data() + kGuard + sizes[0] + kGuard};
  const uint64_t keys[2] = {targets.Add(bases[0], sizes[0]), targets.Add(bases[1], sizes[1])};
  std::vector<std::byte> model = memory;
  std::vector<std::byte> payload(1 << 16);
  uint8_t fill = 1;
  size_t i = 0;
  while (i < size) {
    const size_t header_length = data[i++] % 32;
    if (i + header_length + 2 > size) break;
    std::vector<uint8_t> header(data + i, data + i + header_length);
    i += header_length;
    const size_t length = data[i] | (size_t{data[i + 1]} << 8);
    i += 2;
    // Most keys should be real ones, or the fuzzer never gets past the lookup.
    if (header_length == sizeof(PutMessageHeader)) {
      const uint64_t pick[4] = {keys[0], keys[1], 0, keys[0] ^ keys[1]};
      uint64_t key = pick[header[0] % 4];
      std::memcpy(header.data(), &key, sizeof(key));
    }
    std::fill(payload.begin(), payload.begin() + length, std::byte{fill});
    const absl::Status s = targets.Write(header.data(), header.size(), payload.data(), length);
    // The model.
    bool writes = false;
    if (header_length == sizeof(PutMessageHeader)) {
      PutMessageHeader h;
      std::memcpy(&h, header.data(), sizeof(h));
      for (int r = 0; r < 2; ++r) {
        if (h.key != keys[r] || keys[r] == 0) continue;
        if (h.offset <= sizes[r] && length <= sizes[r] - h.offset) {
          writes = true;
          std::fill(model.begin() + (bases[r] - memory.data()) + h.offset,
                    model.begin() + (bases[r] - memory.data()) + h.offset + length,
                    std::byte{fill});
        }
      }
    }
    Check(s.ok() == writes);
    Check(memory == model);
    fill = static_cast<uint8_t>(fill % 255 + 1);
  }
  targets.Remove(keys[0]);
  targets.Remove(keys[1]);
  return 0;
}
