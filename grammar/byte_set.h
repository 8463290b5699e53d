// A set of byte values, the label of one terminal in a Grammar: 256 bits, tested in one
// shift and mask on the hot path of the mask computation.
#pragma once

#include <cstdint>

namespace baton::grammar {

struct ByteSet {
  uint64_t words[4] = {0, 0, 0, 0};

  static ByteSet Of(uint8_t b) {
    ByteSet s;
    s.Add(b);
    return s;
  }
  static ByteSet Range(uint8_t lo, uint8_t hi) {
    ByteSet s;
    s.AddRange(lo, hi);
    return s;
  }
  bool Has(uint8_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
  void Add(uint8_t b) { words[b >> 6] |= uint64_t{1} << (b & 63); }
  void AddRange(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Add(static_cast<uint8_t>(b));
  }
  void Remove(uint8_t b) { words[b >> 6] &= ~(uint64_t{1} << (b & 63)); }
  void Merge(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) words[i] |= o.words[i];
  }
  bool Empty() const { return (words[0] | words[1] | words[2] | words[3]) == 0; }
  bool operator==(const ByteSet& o) const {
    return words[0] == o.words[0] && words[1] == o.words[1] && words[2] == o.words[2] &&
           words[3] == o.words[3];
  }
};

}  // namespace baton::grammar
