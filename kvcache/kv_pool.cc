#include "kvcache/kv_pool.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/check.h"
#include "common/status.h"
#include "common/strings.h"

namespace baton::kvcache {

absl::Status CheckKvCacheDtype(std::string_view dtype) {
  if (dtype == "bf16" || dtype == "f32") return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat("--kv-cache-dtype (the KV cache's element type) is '",
                                           dtype, "'; it must be bf16 or f32"));
}

void KvPool::Unmapper::operator()(std::byte* p) const {
  if (bytes > 0) ::munmap(p, bytes);
}

KvPool::KvPool(const PageLayout& layout, int64_t num_blocks)
    : layout_(layout), num_blocks_(num_blocks), allocated_(num_blocks, false) {
  free_.reserve(num_blocks);
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

absl::StatusOr<std::unique_ptr<KvPool>> KvPool::Create(const PageLayout& layout, int64_t num_blocks,
                                                       void* memory) {
  if (layout.num_layers < 1 || layout.num_kv_heads < 1 || layout.head_dim < 1 ||
      layout.block_size < 1 || layout.block_size > 1024) {
    return absl::InvalidArgumentError(
        StrCat("KV layout needs layers, kv heads and head_dim >= 1 and block_size in [1, 1024]; "
               "got block_size ",
               layout.block_size));
  }
  BATON_RETURN_IF_ERROR(CheckKvCacheDtype(layout.dtype));
  if (num_blocks < 1 || num_blocks > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        StrCat("KV pool num_blocks must be in [1, 2^30], got ", num_blocks));
  }
  const uint64_t bytes = static_cast<uint64_t>(num_blocks) * layout.page_bytes();
  std::unique_ptr<KvPool> pool(new KvPool(layout, num_blocks));
  if (memory != nullptr) {
    if (reinterpret_cast<uintptr_t>(memory) % 64 != 0) {
      return absl::InvalidArgumentError("the KV pool's memory must be 64-byte aligned");
    }
    pool->data_ =
        std::unique_ptr<std::byte, Unmapper>(static_cast<std::byte*>(memory), Unmapper{0});
    return pool;
  }
  // mmap: page-aligned (so every KV page starts on a cache line) and zero-filled lazily.
  memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        StrCat("cannot allocate the KV pool: ", bytes, " bytes for ", num_blocks,
               " pages: ", std::strerror(errno), "; give the KV cache less memory"));
  }
#ifdef MADV_HUGEPAGE
  (void)::madvise(memory, bytes, MADV_HUGEPAGE);
#endif
  pool->data_ =
      std::unique_ptr<std::byte, Unmapper>(static_cast<std::byte*>(memory), Unmapper{bytes});
  return pool;
}

absl::StatusOr<int32_t> KvPool::Allocate() {
  if (free_.empty()) {
    return absl::ResourceExhaustedError(
        StrCat("KV pool exhausted: all ", num_blocks_, " blocks are in use"));
  }
  const int32_t block = free_.back();
  free_.pop_back();
  allocated_[block] = true;
  return block;
}

void KvPool::Free(int32_t block) {
  BATON_CHECK(block >= 0 && block < num_blocks_ && allocated_[block]);
  allocated_[block] = false;
  free_.push_back(block);
}

}  // namespace baton::kvcache
