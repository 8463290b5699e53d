#include "grammar/token_vocab.h"

#include <algorithm>
#include <limits>

#include "absl/status/status.h"
#include "common/strings.h"

namespace baton::grammar {

absl::StatusOr<std::shared_ptr<const TokenVocab>> MakeTokenVocab(
    std::vector<std::string> token_bytes, std::vector<bool> special) {
  if (token_bytes.size() != special.size()) {
    return absl::InvalidArgumentError(baton::StrCat(
        "token vocab: ", token_bytes.size(), " tokens but ", special.size(), " special flags"));
  }
  if (token_bytes.empty() ||
      token_bytes.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max() - 32)) {
    return absl::InvalidArgumentError(
        baton::StrCat("token vocab: size ", token_bytes.size(), " is out of range"));
  }
  auto v = std::make_shared<TokenVocab>();
  v->token_bytes = std::move(token_bytes);
  v->special = std::move(special);
  size_t total = 0;
  for (size_t id = 0; id < v->token_bytes.size(); ++id) {
    const size_t len = v->token_bytes[id].size();
    if (len > std::numeric_limits<uint16_t>::max()) {
      return absl::InvalidArgumentError(
          baton::StrCat("token vocab: token ", id, " is ", len, " bytes long"));
    }
    if (v->special[id] || len == 0) continue;
    total += len;
    if (total > std::numeric_limits<uint32_t>::max()) {
      return absl::InvalidArgumentError(
          baton::StrCat("token vocab: the tokens' bytes add up to over 4 GiB"));
    }
    v->sorted.push_back(static_cast<int32_t>(id));
    v->max_token_bytes = std::max(v->max_token_bytes, len);
  }
  std::sort(v->sorted.begin(), v->sorted.end(), [&](int32_t a, int32_t b) {
    return v->token_bytes[a] != v->token_bytes[b] ? v->token_bytes[a] < v->token_bytes[b] : a < b;
  });
  v->sorted_offset.reserve(v->sorted.size() + 1);
  for (int32_t id : v->sorted) {
    v->sorted_offset.push_back(static_cast<uint32_t>(v->sorted_blob.size()));
    v->sorted_blob += v->token_bytes[id];
  }
  v->sorted_offset.push_back(static_cast<uint32_t>(v->sorted_blob.size()));
  v->lcp.assign(v->sorted.size(), 0);
  for (size_t i = 1; i < v->sorted.size(); ++i) {
    const std::string& a = v->token_bytes[v->sorted[i - 1]];
    const std::string& b = v->token_bytes[v->sorted[i]];
    size_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    v->lcp[i] = static_cast<uint16_t>(k);
  }
  v->first_byte_start.assign(257, static_cast<int32_t>(v->sorted.size()));
  for (size_t i = v->sorted.size(); i-- > 0;) {
    const uint8_t b = static_cast<uint8_t>(v->token_bytes[v->sorted[i]][0]);
    v->first_byte_start[b] = static_cast<int32_t>(i);
  }
  for (int b = 255; b >= 0; --b) {
    v->first_byte_start[b] = std::min(v->first_byte_start[b], v->first_byte_start[b + 1]);
  }
  return std::shared_ptr<const TokenVocab>(std::move(v));
}

}  // namespace baton::grammar
