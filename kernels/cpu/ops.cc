#include "kernels/cpu/ops.h"

#include <cmath>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/ops_internal.h"

namespace baton::cpu {

namespace {

template <typename T>
float DotOf(const float* a, const T* b, int64_t n) {
  // Eight lanes that the compiler can keep in one vector register; the order of every
  // addition is fixed by the source, so no -ffast-math reassociation is needed.
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * ToFloat(b[i + l]);
  }
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * ToFloat(b[i]);
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

}  // namespace

float Dot(const float* a, const float* b, int64_t n) { return DotOf(a, b, n); }
float Dot(const float* a, const Bf16* b, int64_t n) { return DotOf(a, b, n); }

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  const float mean_square = Dot(x, x, n) / static_cast<float>(n);
  const float scale = 1.0f / std::sqrt(mean_square + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void ApplyRope(float* x, int64_t num_heads, int64_t head_dim, const float* cos, const float* sin,
               bool interleaved) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < num_heads; ++h) {
    float* v = x + h * head_dim;
    if (interleaved) {
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = a * cos[i] - b * sin[i];
        v[2 * i + 1] = a * sin[i] + b * cos[i];
      }
    } else {
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * cos[i] - b * sin[i];
        v[i + half] = b * cos[i] + a * sin[i];
      }
    }
  }
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  if (internal::CurrentIsa() >= internal::Isa::kAvx512) {
    internal::SwiGluAvx512(gate, up, n, out);
    return;
  }
  if (internal::CurrentIsa() >= internal::Isa::kAvx2) {
    internal::SwiGluAvx2(gate, up, n, out);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void AddInPlace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace baton::cpu
