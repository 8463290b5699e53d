// Puts carried as UCX active messages ("messaged puts", docs/transport.md). Where UCX has
// no native RMA between two workers (tcp), it emulates a put with an active message that
// the receiver acknowledges from its progress thread; Debian's UCX 1.13 aborts the
// receiving process when that acknowledgement goes to a peer that has just died
// (ucp_request.inl: "Fatal: unexpected error: Endpoint timeout"). There the sender sends
// the bytes as a message of its own instead, which needs no answer, and the receiver copies
// them into place. The receiver also checks each one: a message names a region by the
// random key it was registered with, and only that region's bytes can be written.
//
//   receiver: key = ucx.put_targets().Add(pool, bytes);      // sent to peers with the rkey
//   sender:   PutMessageHeader h{key, offset}; ucp_am_send_nbx(ep, kPutMessageId, &h, ...)
//   receiver: put_targets().Write(header, header_length, data, length);  // the AM handler
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace baton::transport {

// The UCP active-message ids of this protocol.
inline constexpr unsigned kPutMessageId = 1;  // PutMessageHeader, then the bytes
inline constexpr unsigned kFenceId = 2;       // FenceHeader: answer once every earlier put landed
inline constexpr unsigned kFenceAckId = 3;    // FenceHeader: the answer

// Both sides are little-endian x86-64 or aarch64 hosts of one cluster: fields travel in
// host order.
struct PutMessageHeader {
  uint64_t key = 0;     // PutTargets::Add's key of the region
  uint64_t offset = 0;  // where in the region the message's bytes go
};

struct FenceHeader {
  uint64_t sequence = 0;  // the sender's; the answer repeats it
};

// A registered region's remote key as peers get it (RegisteredRegion::packed_rkey): a
// 4-byte tag and version ("BPK1"), the region's put key and base (8 bytes each), then UCX's
// packed key. The tag makes a key of another format a clear error rather than bytes that
// UCX would unpack without knowing their length.
struct RegionKey {
  uint64_t put_key = 0;  // PutTargets key; 0 when the region takes no put messages
  uint64_t base = 0;     // the region's first byte in its process; put offsets count from it
  std::string_view ucx;  // UCX's packed remote key
};
std::string PackRegionKey(const RegionKey& key);
// InvalidArgument, naming what is wrong, unless `bytes` is PackRegionKey's output with a
// non-empty UCX key. The result's `ucx` points into `bytes`.
absl::StatusOr<RegionKey> ParseRegionKey(std::string_view bytes);

// The regions of this process that messaged puts may write, by key. Thread-safe: the UCX
// progress thread writes while others add and remove regions.
class PutTargets {
 public:
  // Accepts messaged puts into [base, base + bytes) until Remove(key). The key is random and
  // never 0: only a peer that was given it can name the region.
  uint64_t Add(std::byte* base, size_t bytes);
  // Stops accepting them; a write in progress finishes first.
  void Remove(uint64_t key);
  // Copies `length` bytes from `data` where `header` (as received, `header_length` bytes) says.
  // InvalidArgument for a header of another size, NotFound for a key not accepted here,
  // OutOfRange for bytes past the region's end; nothing is written then.
  absl::Status Write(const void* header, size_t header_length, const void* data, size_t length);

 private:
  struct Region {
    std::byte* base;
    size_t bytes;
  };
  std::mutex mu_;  // held while copying, so that Remove never frees memory under a write
  std::unordered_map<uint64_t, Region> regions_;
};

}  // namespace baton::transport
