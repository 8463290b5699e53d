// Logit rows that reach every branch of the sampler's token choice: the cases both the
// host test of kernels/sampling_core.h (sampling_core_test.cc) and the GPU's
// (tests/gpu/sampling_test.cc) run, so that the two check the same rows.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace baton::testing {

enum class RowKind { kNormal, kPeaked, kTies, kExtreme, kInfinite, kAllEqual };
inline constexpr RowKind kRowKinds[] = {RowKind::kNormal,  RowKind::kPeaked,   RowKind::kTies,
                                        RowKind::kExtreme, RowKind::kInfinite, RowKind::kAllEqual};

inline const char* Name(RowKind kind) {
  switch (kind) {
    case RowKind::kNormal:
      return "normal";
    case RowKind::kPeaked:
      return "peaked";
    case RowKind::kTies:
      return "ties";
    case RowKind::kExtreme:
      return "extreme";
    case RowKind::kInfinite:
      return "infinite";
    case RowKind::kAllEqual:
      return "all-equal";
  }
  return "?";
}

inline std::vector<float> MakeRow(RowKind kind, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_int_distribution<int> pick(0, vocab - 1);
  std::vector<float> row(vocab);
  switch (kind) {
    case RowKind::kNormal:  // flat: top-p keeps tens of thousands
      for (float& x : row) x = normal(rng);
      break;
    case RowKind::kPeaked:  // a model's shape: a few tokens far above the rest
      for (float& x : row) x = normal(rng) - 5.0f;
      for (int i = 0; i < 8; ++i) row[pick(rng)] = 12.0f + static_cast<float>(i);
      break;
    case RowKind::kTies:  // quarter steps: long runs of equal keys at every boundary
      for (float& x : row) x = std::round(normal(rng) * 4.0f) / 4.0f;
      for (int i = 0; i < 5; ++i) row[pick(rng)] = 9.0f;  // a tied maximum
      break;
    case RowKind::kExtreme:
      for (float& x : row) {
        const int r = static_cast<int>(rng() % 100);
        x = r == 0   ? NAN
            : r < 6  ? -INFINITY
            : r < 8  ? -FLT_MAX
            : r < 10 ? 1e-40f * static_cast<float>(r)  // subnormal
            : r < 12 ? (r % 2 ? 0.0f : -0.0f)
                     : normal(rng) * 30.0f;
      }
      row[pick(rng)] = 3e38f;  // x - max overflows to -inf for the most negative
      row[pick(rng)] = 3e38f;
      row[pick(rng)] = -3e38f;
      break;
    case RowKind::kInfinite:  // +inf: the greedy fallback
      for (float& x : row) x = normal(rng);
      row[pick(rng)] = INFINITY;
      row[pick(rng)] = NAN;
      break;
    case RowKind::kAllEqual:  // one key for the whole row: every radix level keeps all
      for (float& x : row) x = 0.5f;
      row[0] = -INFINITY;
      break;
  }
  return row;
}

}  // namespace baton::testing
