#include "transport/put_message.h"

#include <cstring>
#include <random>

#include "common/strings.h"

namespace baton::transport {

namespace {

constexpr char kRegionKeyTag[4] = {'B', 'P', 'K', '1'};
constexpr size_t kRegionKeyHeader = sizeof(kRegionKeyTag) + 2 * sizeof(uint64_t);

}  // namespace

std::string PackRegionKey(const RegionKey& key) {
  std::string out(kRegionKeyTag, sizeof(kRegionKeyTag));
  out.append(reinterpret_cast<const char*>(&key.put_key), sizeof(key.put_key));
  out.append(reinterpret_cast<const char*>(&key.base), sizeof(key.base));
  out.append(key.ucx);
  return out;
}

absl::StatusOr<RegionKey> ParseRegionKey(std::string_view bytes) {
  if (bytes.size() <= kRegionKeyHeader) {
    return absl::InvalidArgumentError(StrCat("the remote key has ", bytes.size(),
                                             " bytes; a Baton region key has more than ",
                                             kRegionKeyHeader));
  }
  if (bytes.substr(0, sizeof(kRegionKeyTag)) != std::string_view(kRegionKeyTag, 4)) {
    return absl::InvalidArgumentError(
        "the remote key is not a Baton region key of this version (BPK1): is the peer "
        "from a release before 2026-12-05? Upgrade prefill and decode workers together");
  }
  RegionKey key;
  std::memcpy(&key.put_key, bytes.data() + 4, sizeof(key.put_key));
  std::memcpy(&key.base, bytes.data() + 12, sizeof(key.base));
  key.ucx = bytes.substr(kRegionKeyHeader);
  return key;
}

uint64_t PutTargets::Add(std::byte* base, size_t bytes) {
  std::random_device random;  // the kernel's randomness: keys must not be guessable
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t key = 0;
  while (key == 0 || regions_.count(key) > 0) {
    key = (uint64_t{random()} << 32) ^ random();
  }
  regions_.emplace(key, Region{base, bytes});
  return key;
}

void PutTargets::Remove(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  regions_.erase(key);
}

absl::Status PutTargets::Write(const void* header, size_t header_length, const void* data,
                               size_t length) {
  PutMessageHeader h;
  if (header_length != sizeof(h)) {
    return absl::InvalidArgumentError(
        StrCat("a put message's header has ", header_length, " bytes, not ", sizeof(h)));
  }
  std::memcpy(&h, header, sizeof(h));
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = regions_.find(h.key);
  if (h.key == 0 || it == regions_.end()) {
    return absl::NotFoundError("a put message names a region this process does not accept");
  }
  const Region& r = it->second;
  if (h.offset > r.bytes || length > r.bytes - h.offset) {
    return absl::OutOfRangeError(StrCat("a put message of ", length, " bytes at offset ", h.offset,
                                        " does not fit its region of ", r.bytes, " bytes"));
  }
  if (length > 0) std::memcpy(r.base + h.offset, data, length);
  return absl::OkStatus();
}

}  // namespace baton::transport
