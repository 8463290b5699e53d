#include "transport/put_message.h"

#include <cstring>
#include <random>

#include "common/strings.h"

namespace baton::transport {

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
