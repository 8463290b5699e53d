#include "kernels/cpu/ops.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/matmul.h"

namespace baton::cpu {
namespace {

// SwiGlu on every ISA the CPU has against float64, for lengths that exercise the vector
// tails, and at the extremes where exp overflows or underflows.
TEST(OpsTest, SwiGluMatchesAFloat64ReferenceOnEveryIsa) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 4.0f);
  for (const int64_t n : {1, 7, 15, 16, 17, 33, 1536}) {
    std::vector<float> gate(n), up(n), out(n);
    for (float& x : gate) x = d(rng);
    for (float& x : up) x = d(rng);
    gate[0] = -120.0f;  // exp(120) is +inf in float: silu is -0
    if (n > 1) gate[1] = 120.0f;
    if (n > 2) gate[2] = 0.0f;
    if (n > 3) gate[3] = -1e38f;  // silu is -0, not a multiple of the gate
    if (n > 4) gate[4] = -88.5f;  // between the AVX2 exp's limit and exp's overflow
    for (const auto isa : {internal::Isa::kScalar, internal::Isa::kAvx2, internal::Isa::kAvx512,
                           internal::Isa::kAvx512Bf16}) {
      if (!internal::IsaSupported(isa)) continue;
      internal::SetIsaForTesting(isa);
      SwiGlu(gate.data(), up.data(), n, out.data());
      for (int64_t i = 0; i < n; ++i) {
        const double g = gate[i];
        const double want = g / (1.0 + std::exp(-g)) * up[i];
        ASSERT_TRUE(std::isfinite(out[i])) << internal::IsaName(isa) << " i " << i;
        ASSERT_NEAR(out[i], want, 4e-7 * std::abs(want) + 1e-30)
            << internal::IsaName(isa) << " n " << n << " gate " << g;
      }
    }
    internal::ResetIsaForTesting();
  }
}

// In place (out == gate), as the engine calls it.
TEST(OpsTest, SwiGluInPlace) {
  std::vector<float> gate = {-1.0f, 0.5f, 2.0f}, up = {1.0f, 2.0f, 3.0f};
  std::vector<float> copy = gate, expect(3);
  SwiGlu(copy.data(), up.data(), 3, expect.data());
  SwiGlu(gate.data(), up.data(), 3, gate.data());
  EXPECT_EQ(gate, expect);
}

}  // namespace
}  // namespace baton::cpu
