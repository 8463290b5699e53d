#include "kvcache/block_hash.h"

#include <openssl/evp.h>

#include <cstdint>
#include <vector>

#include "common/check.h"

namespace baton::kvcache {
namespace {

constexpr char kDomain[] = "baton-kv-block-hash-v1";

void PutU32(EVP_MD_CTX* ctx, uint32_t v) {
  const uint8_t b[4] = {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8),
                        static_cast<uint8_t>(v >> 16), static_cast<uint8_t>(v >> 24)};
  EVP_DigestUpdate(ctx, b, 4);
}

void PutString(EVP_MD_CTX* ctx, const std::string& s) {
  PutU32(ctx, static_cast<uint32_t>(s.size()));
  EVP_DigestUpdate(ctx, s.data(), s.size());
}

// SHA-256 fetched once: EVP_sha256() makes OpenSSL 3 look the implementation up again
// on every EVP_DigestInit_ex.
const EVP_MD* Sha256Md() {
  static const EVP_MD* const md = [] {
    EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    BATON_CHECK(fetched != nullptr);
    return fetched;
  }();
  return md;
}

// One SHA-256 context per thread, reused: creating one costs more than hashing a block.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) { BATON_CHECK(ctx_ != nullptr); }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  EVP_MD_CTX* Begin() {
    BATON_CHECK(EVP_DigestInit_ex(ctx_, Sha256Md(), nullptr) == 1);
    return ctx_;
  }
  // Scratch for a block's bytes, so that it is hashed in one update.
  std::vector<uint8_t>& buffer() { return buffer_; }
  BlockHash Finish() {
    BlockHash out;
    unsigned int n = 0;
    BATON_CHECK(EVP_DigestFinal_ex(ctx_, out.bytes.data(), &n) == 1 && n == 32);
    return out;
  }

 private:
  EVP_MD_CTX* ctx_;
  std::vector<uint8_t> buffer_;
};

void AppendU32(std::vector<uint8_t>* out, uint32_t v) {
  out->push_back(static_cast<uint8_t>(v));
  out->push_back(static_cast<uint8_t>(v >> 8));
  out->push_back(static_cast<uint8_t>(v >> 16));
  out->push_back(static_cast<uint8_t>(v >> 24));
}

Sha256& ThreadSha256() {
  thread_local Sha256 sha;
  return sha;
}

}  // namespace

std::string BlockHash::Hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(64, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    s[2 * i] = kDigits[bytes[i] >> 4];
    s[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return s;
}

BlockHash NamespaceHash(const HashNamespace& ns, int64_t block_size) {
  Sha256& sha = ThreadSha256();
  EVP_MD_CTX* ctx = sha.Begin();
  EVP_DigestUpdate(ctx, kDomain, sizeof(kDomain));  // with its terminating NUL
  PutString(ctx, ns.model);
  PutString(ctx, ns.adapter);
  PutString(ctx, ns.cache_salt);
  PutU32(ctx, static_cast<uint32_t>(block_size));
  return sha.Finish();
}

BlockHash ChainBlockHash(const BlockHash& parent, std::span<const int32_t> tokens) {
  Sha256& sha = ThreadSha256();
  // The same bytes as one update per field, gathered first: an update per token cost
  // more than the compression itself.
  std::vector<uint8_t>& bytes = sha.buffer();
  bytes.clear();
  bytes.insert(bytes.end(), parent.bytes.begin(), parent.bytes.end());
  AppendU32(&bytes, static_cast<uint32_t>(tokens.size()));
  for (int32_t t : tokens) AppendU32(&bytes, static_cast<uint32_t>(t));
  EVP_MD_CTX* ctx = sha.Begin();
  EVP_DigestUpdate(ctx, bytes.data(), bytes.size());
  return sha.Finish();
}

std::vector<BlockHash> HashFullBlocks(const BlockHash& root, std::span<const int32_t> tokens,
                                      int64_t block_size) {
  BATON_CHECK(block_size > 0);
  std::vector<BlockHash> out;
  const size_t n = tokens.size() / static_cast<size_t>(block_size);
  out.reserve(n);
  BlockHash parent = root;
  for (size_t i = 0; i < n; ++i) {
    parent = ChainBlockHash(parent, tokens.subspan(i * block_size, block_size));
    out.push_back(parent);
  }
  return out;
}

}  // namespace baton::kvcache
