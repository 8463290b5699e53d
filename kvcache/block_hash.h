// Chained block hashes: the identity of a full KV page's contents. Spec version 1 is in
// docs/prefix_cache.md; the router and every worker compute them with this code and
// exchange kBlockHashSpecVersion when they connect.
//
//   const BlockHash root = NamespaceHash({.model = "baton-tiny", .cache_salt = salt}, 16);
//   std::vector<BlockHash> hashes = HashFullBlocks(root, prompt_ids, 16);
//
// SHA-256 throughout, so that a client cannot craft a prompt whose blocks collide with
// another tenant's cached ones.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace baton::kvcache {

inline constexpr int kBlockHashSpecVersion = 1;

struct BlockHash {
  std::array<uint8_t, 32> bytes{};

  friend bool operator==(const BlockHash&, const BlockHash&) = default;
  friend auto operator<=>(const BlockHash&, const BlockHash&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const BlockHash& b) {
    // Already uniformly distributed: the first 8 bytes are a fine table hash.
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | b.bytes[i];
    return H::combine(std::move(h), v);
  }
  std::string Hex() const;  // 64 lowercase hex digits
};

// What separates caches that must never share a block: the model, the adapter (LoRA)
// applied to it, and a salt the server derives per tenant. Empty strings are allowed.
struct HashNamespace {
  std::string model;
  std::string adapter;
  std::string cache_salt;
};

// The parent of a sequence's first block.
BlockHash NamespaceHash(const HashNamespace& ns, int64_t block_size);

// The hash of a block holding `tokens` whose predecessor's hash is `parent`.
BlockHash ChainBlockHash(const BlockHash& parent, std::span<const int32_t> tokens);

// Hashes of every full block of `tokens` (tokens.size() / block_size of them), chained
// from `root`.
std::vector<BlockHash> HashFullBlocks(const BlockHash& root, std::span<const int32_t> tokens,
                                      int64_t block_size);

}  // namespace baton::kvcache
