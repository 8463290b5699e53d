#include "tokenizer/bpe.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <functional>

#include "common/utf8.h"
#include "tokenizer/byte_level.h"

namespace baton::tokenizer {
namespace {

// Up to this many symbols a linear scan for the best pair beats a heap (tiktoken makes
// the same choice); longer pieces (runs of spaces, base64) need O(n log n).
constexpr size_t kShortPiece = 64;

TokenId Find(const Vocab& v, std::string_view text) {
  auto it = v.token_to_id.find(text);
  return it == v.token_to_id.end() ? -1 : it->second;
}

struct Candidate {
  int32_t rank;
  int left;
  TokenId left_id;
  TokenId right_id;
  TokenId result;
  bool operator>(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

}  // namespace

BpeEncoder::BpeEncoder(const Vocab* vocab) : vocab_(vocab) {
  const bool byte_level = vocab_->kind == ModelKind::kByteLevelBpe;
  for (int b = 0; b < 256; ++b) {
    if (byte_level) {
      byte_ids_[b] = Find(*vocab_, ByteToUnicode(static_cast<uint8_t>(b)));
    } else {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      byte_ids_[b] = Find(*vocab_, name);
    }
  }
  whole_piece_.reserve(vocab_->token_to_id.size());
  std::string bytes;
  std::vector<TokenId> ids;
  for (const auto& [text, id] : vocab_->token_to_id) {
    const TokenType type = vocab_->types[id];
    if (type == TokenType::kControl || type == TokenType::kUnknown || type == TokenType::kByte) {
      continue;
    }
    std::string_view piece = text;
    if (byte_level) {
      bytes.clear();
      if (!UnicodeToBytes(text, &bytes)) continue;
      piece = bytes;
    }
    if (!vocab_->ignore_merges) {
      ids.clear();
      EncodeWithMerges(piece, &ids);
      if (ids.size() != 1 || ids[0] != id) continue;
    }
    whole_piece_.try_emplace(piece, id);
  }
}

int32_t BpeEncoder::PairRank(TokenId left, TokenId right, TokenId* result) const {
  if (left < 0 || right < 0) return INT32_MAX;
  auto it = vocab_->merges.find(Vocab::PairKey(left, right));
  if (it == vocab_->merges.end()) return INT32_MAX;
  *result = it->second.result;
  return it->second.rank;
}

void BpeEncoder::MergeShort(std::vector<Symbol>* symbols) const {
  std::vector<Symbol>& s = *symbols;
  // rank[i] and result[i] describe the pair that starts at symbol i.
  std::array<int32_t, kShortPiece> rank;
  std::array<TokenId, kShortPiece> result;
  const int n = static_cast<int>(s.size());
  for (int i = 0; i < n; ++i) {
    rank[i] = i + 1 < n ? PairRank(s[i].id, s[i + 1].id, &result[i]) : INT32_MAX;
  }
  while (true) {
    int best = -1;
    int32_t best_rank = INT32_MAX;
    for (int i = 0; i >= 0; i = s[i].next) {
      if (rank[i] < best_rank) {  // strict: ties stay leftmost
        best_rank = rank[i];
        best = i;
      }
    }
    if (best < 0) return;
    Symbol& left = s[best];
    Symbol& right = s[left.next];
    left.id = result[best];
    left.end = right.end;
    left.next = right.next;
    if (right.next >= 0) s[right.next].prev = best;
    right.id = -2;
    rank[best] = left.next >= 0 ? PairRank(left.id, s[left.next].id, &result[best]) : INT32_MAX;
    if (left.prev >= 0) rank[left.prev] = PairRank(s[left.prev].id, left.id, &result[left.prev]);
  }
}

void BpeEncoder::MergeLong(std::vector<Symbol>* symbols) const {
  std::vector<Symbol>& s = *symbols;
  // A binary min-heap whose storage is reused across calls on this thread.
  thread_local std::vector<Candidate> heap;
  heap.clear();
  auto consider = [&](int left) {
    if (left < 0) return;
    const int right = s[left].next;
    if (right < 0) return;
    TokenId result = -1;
    const int32_t rank = PairRank(s[left].id, s[right].id, &result);
    if (rank == INT32_MAX) return;
    heap.push_back({rank, left, s[left].id, s[right].id, result});
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (int i = 0; i + 1 < static_cast<int>(s.size()); ++i) consider(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = s[c.left];
    // A stale candidate: one side was merged away since it was queued.
    if (left.id != c.left_id || left.next < 0 || s[left.next].id != c.right_id) continue;
    Symbol& right = s[left.next];
    left.id = c.result;
    left.end = right.end;
    left.next = right.next;
    if (right.next >= 0) s[right.next].prev = c.left;
    right.id = -2;  // dead
    right.prev = right.next = -1;
    consider(left.prev);
    consider(c.left);
  }
}

void BpeEncoder::EncodePiece(std::string_view piece, std::vector<TokenId>* out) const {
  if (piece.empty()) return;
  auto it = whole_piece_.find(piece);
  if (it != whole_piece_.end()) {
    out->push_back(it->second);
    return;
  }
  EncodeWithMerges(piece, out);
}

void BpeEncoder::EncodeWithMerges(std::string_view piece, std::vector<TokenId>* out) const {
  // Nothing to merge; and symbols.back() below needs one symbol (a vocabulary may hold an
  // empty token, which the constructor encodes).
  if (piece.empty()) return;
  const Vocab& v = *vocab_;
  thread_local std::vector<Symbol> symbols;
  symbols.clear();
  if (v.kind == ModelKind::kByteLevelBpe) {
    for (size_t i = 0; i < piece.size(); ++i) {
      const int n = static_cast<int>(symbols.size());
      symbols.push_back({byte_ids_[static_cast<uint8_t>(piece[i])], n - 1, n + 1,
                         static_cast<uint32_t>(i), static_cast<uint32_t>(i + 1)});
    }
  } else {
    size_t pos = 0;
    while (pos < piece.size()) {
      const size_t begin = pos;
      char32_t cp = 0;
      DecodeUtf8(piece, &pos, &cp);
      const int n = static_cast<int>(symbols.size());
      symbols.push_back({Find(v, piece.substr(begin, pos - begin)), n - 1, n + 1,
                         static_cast<uint32_t>(begin), static_cast<uint32_t>(pos)});
    }
  }
  symbols.back().next = -1;
  if (symbols.size() <= kShortPiece) {
    MergeShort(&symbols);
  } else {
    MergeLong(&symbols);
  }
  if (v.kind == ModelKind::kByteLevelBpe) {
    for (int i = 0; i >= 0; i = symbols[i].next) {
      const TokenId id = symbols[i].id >= 0 ? symbols[i].id : v.unk_id;
      if (id >= 0) out->push_back(id);
    }
    return;
  }
  EmitSentencePiece(piece, symbols, out);
}

void BpeEncoder::EmitSentencePiece(std::string_view piece, const std::vector<Symbol>& symbols,
                                   std::vector<TokenId>* out) const {
  const Vocab& v = *vocab_;
  bool previous_unk = false;
  for (int i = 0; i >= 0; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    if (s.id >= 0) {
      out->push_back(s.id);
      previous_unk = false;
      continue;
    }
    if (v.byte_fallback) {
      bool all_bytes = true;
      for (uint32_t b = s.begin; b < s.end; ++b) {
        all_bytes = all_bytes && byte_ids_[static_cast<uint8_t>(piece[b])] >= 0;
      }
      if (all_bytes) {
        for (uint32_t b = s.begin; b < s.end; ++b) {
          out->push_back(byte_ids_[static_cast<uint8_t>(piece[b])]);
        }
        previous_unk = false;
        continue;
      }
    }
    // Consecutive unknown characters fuse into one <unk>, as SentencePiece does.
    if (v.unk_id >= 0 && !previous_unk) out->push_back(v.unk_id);
    previous_unk = true;
  }
}

}  // namespace baton::tokenizer
