#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "common/utf8.h"
#include "tokenizer/byte_level.h"

namespace baton::tokenizer {
namespace {

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
  for (int b = 0; b < 256; ++b) {
    if (vocab_->kind == ModelKind::kByteLevelBpe) {
      byte_ids_[b] = Find(*vocab_, ByteToUnicode(static_cast<uint8_t>(b)));
    } else {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      byte_ids_[b] = Find(*vocab_, name);
    }
  }
}

void BpeEncoder::Merge(std::vector<Symbol>* symbols) const {
  std::vector<Symbol>& s = *symbols;
  if (s.size() < 2) return;
  // A binary min-heap whose storage is reused across calls on this thread.
  thread_local std::vector<Candidate> heap;
  heap.clear();
  auto consider = [&](int left) {
    if (left < 0) return;
    const int right = s[left].next;
    if (right < 0 || s[left].id < 0 || s[right].id < 0) return;
    auto it = vocab_->merges.find(Vocab::PairKey(s[left].id, s[right].id));
    if (it == vocab_->merges.end()) return;
    heap.push_back({it->second.rank, left, s[left].id, s[right].id, it->second.result});
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
  const Vocab& v = *vocab_;
  thread_local std::vector<Symbol> symbols;
  symbols.clear();
  if (v.kind == ModelKind::kByteLevelBpe) {
    if (v.ignore_merges) {
      const TokenId whole = Find(v, BytesToUnicode(piece));
      if (whole >= 0) {
        out->push_back(whole);
        return;
      }
    }
    for (size_t i = 0; i < piece.size(); ++i) {
      const int n = static_cast<int>(symbols.size());
      symbols.push_back({byte_ids_[static_cast<uint8_t>(piece[i])], n - 1, n + 1,
                         static_cast<uint32_t>(i), static_cast<uint32_t>(i + 1)});
    }
  } else {
    if (v.ignore_merges) {
      const TokenId whole = Find(v, piece);
      if (whole >= 0) {
        out->push_back(whole);
        return;
      }
    }
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
  Merge(&symbols);
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
