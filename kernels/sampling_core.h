// The token choice of sampling, written once for the CPU sampler (engine/sampler.h) and the
// GPU (kernels/cuda/sampling.cuh): from a row of processed logits (NaN already -inf, the
// logit processors applied), the temperature, top-k, top-p and min-p, and the step's
// uniform draw u, the chosen id. Both run this code one sequence per thread, so for the same
// row and u they do the same float and double operations in the same order and choose the
// same id. docs/sampling.md describes the pipeline and this header's part of it.
//
//   std::vector<std::byte> buffer(sampling::ScratchBytes(vocab));  // or device memory
//   sampling::ChoiceParams params;
//   params.temperature = 0.8;
//   params.top_p = 0.9;
//   const int32_t id = sampling::ChooseToken(row, vocab, params, CounterUniform(seed, step),
//                                            sampling::ScratchAt(buffer.data(), vocab));
//
// Header-only and C++17 (nvcc builds the CUDA sources as C++17): no allocation, no
// exceptions, no std containers, only raw pointers and the caller's scratch.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/counter_rng.h"  // BATON_HOST_DEVICE

namespace baton::kernels::sampling {

// What the choice reads of a request's parameters (engine/sampling_params.h). Temperature 0
// is greedy; top_k <= 0 or >= vocab, top_p >= 1 and min_p <= 0 are off.
struct ChoiceParams {
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  double min_p = 0.0;
};

// Reductions over ~150k logits run in independent lanes: one running max or sum is bound by
// the latency of each step. The lanes combine in a fixed order, so results stay
// deterministic.
inline constexpr size_t kLanes = 8;
// The inverse CDF sums blocks of this many weights before it scans one block.
inline constexpr size_t kCdfBlock = 256;
// The radix select's widest level: 11 bits of the key.
inline constexpr size_t kRadixBuckets = 2048;

// ---------------------------------------------------------------------------------------
// Scratch

// The caller's memory for one ChooseToken over `vocab` entries.
struct Scratch {
  double* mass;     // kRadixBuckets: a radix level's weight per bucket
  uint32_t* count;  // kRadixBuckets: its tokens per bucket
  double* blocks;   // CdfBlocks(vocab): the inverse CDF's block sums
  float* probs;     // vocab: unnormalised probabilities, by id
  uint32_t* keys;   // vocab: DescendingKey of each logit
  int32_t* cand;    // vocab: top-k's and top-p's candidates, in id order
  int32_t* group;   // vocab: the tokens of a radix level's chosen bucket
};

BATON_HOST_DEVICE constexpr size_t CdfBlocks(size_t n) { return (n + kCdfBlock - 1) / kCdfBlock; }

BATON_HOST_DEVICE constexpr size_t AlignUp(size_t bytes, size_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

// Byte offsets of Scratch's arrays, each 16-byte aligned; `bytes` is a multiple of 256 so
// that the scratch of several sequences can sit side by side.
struct ScratchLayout {
  size_t mass, count, blocks, probs, keys, cand, group, bytes;
};

BATON_HOST_DEVICE constexpr ScratchLayout ScratchLayoutFor(size_t vocab) {
  ScratchLayout l{};
  l.mass = 0;
  l.count = l.mass + AlignUp(kRadixBuckets * sizeof(double), 16);
  l.blocks = l.count + AlignUp(kRadixBuckets * sizeof(uint32_t), 16);
  l.probs = l.blocks + AlignUp(CdfBlocks(vocab) * sizeof(double), 16);
  l.keys = l.probs + AlignUp(vocab * sizeof(float), 16);
  l.cand = l.keys + AlignUp(vocab * sizeof(uint32_t), 16);
  l.group = l.cand + AlignUp(vocab * sizeof(int32_t), 16);
  l.bytes = AlignUp(l.group + vocab * sizeof(int32_t), 256);
  return l;
}

// Scratch bytes for a vocabulary of `vocab` entries: 16 per entry (probs, keys, cand,
// group), 8 per 256 entries (block sums) and 24 KiB of radix histograms, rounded up to
// 256. About 2 MiB at vocab 128256.
BATON_HOST_DEVICE constexpr size_t ScratchBytes(size_t vocab) {
  return ScratchLayoutFor(vocab).bytes;
}

// Scratch laid out in `base`: ScratchBytes(vocab) bytes, 16-byte aligned.
BATON_HOST_DEVICE inline Scratch ScratchAt(void* base, size_t vocab) {
  char* p = static_cast<char*>(base);
  const ScratchLayout l = ScratchLayoutFor(vocab);
  Scratch s;
  s.mass = reinterpret_cast<double*>(p + l.mass);
  s.count = reinterpret_cast<uint32_t*>(p + l.count);
  s.blocks = reinterpret_cast<double*>(p + l.blocks);
  s.probs = reinterpret_cast<float*>(p + l.probs);
  s.keys = reinterpret_cast<uint32_t*>(p + l.keys);
  s.cand = reinterpret_cast<int32_t*>(p + l.cand);
  s.group = reinterpret_cast<int32_t*>(p + l.group);
  return s;
}

// ---------------------------------------------------------------------------------------
// Arithmetic that rounds the same on the host and the device

template <typename T>
BATON_HOST_DEVICE constexpr T Min(T a, T b) {  // std::min's choice: a unless b < a
  return b < a ? b : a;
}

BATON_HOST_DEVICE inline bool IsNan(float x) { return x != x; }
BATON_HOST_DEVICE inline bool IsFinite(float x) { return x >= -FLT_MAX && x <= FLT_MAX; }

BATON_HOST_DEVICE inline uint32_t FloatBits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
#endif
}

BATON_HOST_DEVICE inline uint64_t DoubleBits(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
#endif
}

BATON_HOST_DEVICE inline double DoubleFromBits(uint64_t bits) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(bits));
#else
  double x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
#endif
}

// Products and sums rounded one at a time: every double product in this file goes through
// Mul. nvcc fuses a * b + c into one FMA, rounded once, unless told not to, and the host
// build (x86-64 without -mfma) never fuses, so the device must not either. Only Exp has
// products that feed sums; a host build that fuses them (GCC's default where FMA exists:
// -march=native, aarch64) moves a double there by an ulp now and then, which changes the
// float result only near a rounding tie: in none of the 1.1M arguments whose bits
// engine_sampling_core_test pins.
BATON_HOST_DEVICE inline double Mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

BATON_HOST_DEVICE inline double Add(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

BATON_HOST_DEVICE inline double Sub(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

// e^x in float with the same bits on every host and device. Library expf differs: glibc's
// (whose variant also depends on the CPU) and CUDA's disagree in the last bit for some
// arguments, enough to move a min-p or top-p boundary or a draw. This one uses basic double
// operations only, in the way glibc's expf does: x = (k + r) ln2/256 with k an integer and
// |r| <= 1/2, so e^x = 2^(k/256) e^(r ln2/256); the first from a table of 2^(j/256) and
// exponent bits, the second from its Taylor polynomial to r^2 (relative error < 5e-10).
// One rounding to float at the end: never more than 1 ulp from e^x, and the correctly
// rounded value for all but 224726 of the 1.1e9 floats in [-104, 0] (glibc's expf misses
// 97052). Below -104 (e^x < 2^-150 rounds to zero) and at -inf it is 0; NaN stays NaN.
BATON_HOST_DEVICE inline float Exp(float x) {
  if (!(x >= -104.0f)) return x < 0.0f ? 0.0f : x;
  if (x > 89.0f) return INFINITY;  // past FLT_MAX
  // 2^(j/256) for j = 0 .. 255, each the nearest double (from 60-digit decimals). Static: in
  // device code an implicit __device__ array, read by index.
  static constexpr double kExp2Fraction[256] = {
      0x1.0000000000000p+0, 0x1.00b1afa5abcbfp+0, 0x1.0163da9fb3335p+0, 0x1.02168143b0281p+0,
      0x1.02c9a3e778061p+0, 0x1.037d42e11bbccp+0, 0x1.04315e86e7f85p+0, 0x1.04e5f72f654b1p+0,
      0x1.059b0d3158574p+0, 0x1.0650a0e3c1f89p+0, 0x1.0706b29ddf6dep+0, 0x1.07bd42b72a836p+0,
      0x1.0874518759bc8p+0, 0x1.092bdf66607e0p+0, 0x1.09e3ecac6f383p+0, 0x1.0a9c79b1f3919p+0,
      0x1.0b5586cf9890fp+0, 0x1.0c0f145e46c85p+0, 0x1.0cc922b7247f7p+0, 0x1.0d83b23395decp+0,
      0x1.0e3ec32d3d1a2p+0, 0x1.0efa55fdfa9c5p+0, 0x1.0fb66affed31bp+0, 0x1.1073028d7233ep+0,
      0x1.11301d0125b51p+0, 0x1.11edbab5e2ab6p+0, 0x1.12abdc06c31ccp+0, 0x1.136a814f204abp+0,
      0x1.1429aaea92de0p+0, 0x1.14e95934f312ep+0, 0x1.15a98c8a58e51p+0, 0x1.166a45471c3c2p+0,
      0x1.172b83c7d517bp+0, 0x1.17ed48695bbc0p+0, 0x1.18af9388c8deap+0, 0x1.1972658375d2fp+0,
      0x1.1a35beb6fcb75p+0, 0x1.1af99f8138a1cp+0, 0x1.1bbe084045cd4p+0, 0x1.1c82f95281c6bp+0,
      0x1.1d4873168b9aap+0, 0x1.1e0e75eb44027p+0, 0x1.1ed5022fcd91dp+0, 0x1.1f9c18438ce4dp+0,
      0x1.2063b88628cd6p+0, 0x1.212be3578a819p+0, 0x1.21f49917ddc96p+0, 0x1.22bdda27912d1p+0,
      0x1.2387a6e756238p+0, 0x1.2451ffb82140ap+0, 0x1.251ce4fb2a63fp+0, 0x1.25e85711ece75p+0,
      0x1.26b4565e27cddp+0, 0x1.2780e341ddf29p+0, 0x1.284dfe1f56381p+0, 0x1.291ba7591bb70p+0,
      0x1.29e9df51fdee1p+0, 0x1.2ab8a66d10f13p+0, 0x1.2b87fd0dad990p+0, 0x1.2c57e39771b2fp+0,
      0x1.2d285a6e4030bp+0, 0x1.2df961f641589p+0, 0x1.2ecafa93e2f56p+0, 0x1.2f9d24abd886bp+0,
      0x1.306fe0a31b715p+0, 0x1.31432edeeb2fdp+0, 0x1.32170fc4cd831p+0, 0x1.32eb83ba8ea32p+0,
      0x1.33c08b26416ffp+0, 0x1.3496266e3fa2dp+0, 0x1.356c55f929ff1p+0, 0x1.36431a2de883bp+0,
      0x1.371a7373aa9cbp+0, 0x1.37f26231e754ap+0, 0x1.38cae6d05d866p+0, 0x1.39a401b7140efp+0,
      0x1.3a7db34e59ff7p+0, 0x1.3b57fbfec6cf4p+0, 0x1.3c32dc313a8e5p+0, 0x1.3d0e544ede173p+0,
      0x1.3dea64c123422p+0, 0x1.3ec70df1c5175p+0, 0x1.3fa4504ac801cp+0, 0x1.40822c367a024p+0,
      0x1.4160a21f72e2ap+0, 0x1.423fb2709468ap+0, 0x1.431f5d950a897p+0, 0x1.43ffa3f84b9d4p+0,
      0x1.44e086061892dp+0, 0x1.45c2042a7d232p+0, 0x1.46a41ed1d0057p+0, 0x1.4786d668b3237p+0,
      0x1.486a2b5c13cd0p+0, 0x1.494e1e192aed2p+0, 0x1.4a32af0d7d3dep+0, 0x1.4b17dea6db7d7p+0,
      0x1.4bfdad5362a27p+0, 0x1.4ce41b817c114p+0, 0x1.4dcb299fddd0dp+0, 0x1.4eb2d81d8abffp+0,
      0x1.4f9b2769d2ca7p+0, 0x1.508417f4531eep+0, 0x1.516daa2cf6642p+0, 0x1.5257de83f4eefp+0,
      0x1.5342b569d4f82p+0, 0x1.542e2f4f6ad27p+0, 0x1.551a4ca5d920fp+0, 0x1.56070dde910d2p+0,
      0x1.56f4736b527dap+0, 0x1.57e27dbe2c4cfp+0, 0x1.58d12d497c7fdp+0, 0x1.59c0827ff07ccp+0,
      0x1.5ab07dd485429p+0, 0x1.5ba11fba87a03p+0, 0x1.5c9268a5946b7p+0, 0x1.5d84590998b93p+0,
      0x1.5e76f15ad2148p+0, 0x1.5f6a320dceb71p+0, 0x1.605e1b976dc09p+0, 0x1.6152ae6cdf6f4p+0,
      0x1.6247eb03a5585p+0, 0x1.633dd1d1929fdp+0, 0x1.6434634ccc320p+0, 0x1.652b9febc8fb7p+0,
      0x1.6623882552225p+0, 0x1.671c1c70833f6p+0, 0x1.68155d44ca973p+0, 0x1.690f4b19e9538p+0,
      0x1.6a09e667f3bcdp+0, 0x1.6b052fa75173ep+0, 0x1.6c012750bdabfp+0, 0x1.6cfdcddd47645p+0,
      0x1.6dfb23c651a2fp+0, 0x1.6ef9298593ae5p+0, 0x1.6ff7df9519484p+0, 0x1.70f7466f42e87p+0,
      0x1.71f75e8ec5f74p+0, 0x1.72f8286ead08ap+0, 0x1.73f9a48a58174p+0, 0x1.74fbd35d7cbfdp+0,
      0x1.75feb564267c9p+0, 0x1.77024b1ab6e09p+0, 0x1.780694fde5d3fp+0, 0x1.790b938ac1cf6p+0,
      0x1.7a11473eb0187p+0, 0x1.7b17b0976cfdbp+0, 0x1.7c1ed0130c132p+0, 0x1.7d26a62ff86f0p+0,
      0x1.7e2f336cf4e62p+0, 0x1.7f3878491c491p+0, 0x1.80427543e1a12p+0, 0x1.814d2add106d9p+0,
      0x1.82589994cce13p+0, 0x1.8364c1eb941f7p+0, 0x1.8471a4623c7adp+0, 0x1.857f4179f5b21p+0,
      0x1.868d99b4492edp+0, 0x1.879cad931a436p+0, 0x1.88ac7d98a6699p+0, 0x1.89bd0a478580fp+0,
      0x1.8ace5422aa0dbp+0, 0x1.8be05bad61778p+0, 0x1.8cf3216b5448cp+0, 0x1.8e06a5e0866d9p+0,
      0x1.8f1ae99157736p+0, 0x1.902fed0282c8ap+0, 0x1.9145b0b91ffc6p+0, 0x1.925c353aa2fe2p+0,
      0x1.93737b0cdc5e5p+0, 0x1.948b82b5f98e5p+0, 0x1.95a44cbc8520fp+0, 0x1.96bdd9a7670b3p+0,
      0x1.97d829fde4e50p+0, 0x1.98f33e47a22a2p+0, 0x1.9a0f170ca07bap+0, 0x1.9b2bb4d53fe0dp+0,
      0x1.9c49182a3f090p+0, 0x1.9d674194bb8d5p+0, 0x1.9e86319e32323p+0, 0x1.9fa5e8d07f29ep+0,
      0x1.a0c667b5de565p+0, 0x1.a1e7aed8eb8bbp+0, 0x1.a309bec4a2d33p+0, 0x1.a42c980460ad8p+0,
      0x1.a5503b23e255dp+0, 0x1.a674a8af46052p+0, 0x1.a799e1330b358p+0, 0x1.a8bfe53c12e59p+0,
      0x1.a9e6b5579fdbfp+0, 0x1.ab0e521356ebap+0, 0x1.ac36bbfd3f37ap+0, 0x1.ad5ff3a3c2774p+0,
      0x1.ae89f995ad3adp+0, 0x1.afb4ce622f2ffp+0, 0x1.b0e07298db666p+0, 0x1.b20ce6c9a8952p+0,
      0x1.b33a2b84f15fbp+0, 0x1.b468415b749b1p+0, 0x1.b59728de5593ap+0, 0x1.b6c6e29f1c52ap+0,
      0x1.b7f76f2fb5e47p+0, 0x1.b928cf22749e4p+0, 0x1.ba5b030a1064ap+0, 0x1.bb8e0b79a6f1fp+0,
      0x1.bcc1e904bc1d2p+0, 0x1.bdf69c3f3a207p+0, 0x1.bf2c25bd71e09p+0, 0x1.c06286141b33dp+0,
      0x1.c199bdd85529cp+0, 0x1.c2d1cd9fa652cp+0, 0x1.c40ab5fffd07ap+0, 0x1.c544778fafb22p+0,
      0x1.c67f12e57d14bp+0, 0x1.c7ba88988c933p+0, 0x1.c8f6d9406e7b5p+0, 0x1.ca3405751c4dbp+0,
      0x1.cb720dcef9069p+0, 0x1.ccb0f2e6d1675p+0, 0x1.cdf0b555dc3fap+0, 0x1.cf3155b5bab74p+0,
      0x1.d072d4a07897cp+0, 0x1.d1b532b08c968p+0, 0x1.d2f87080d89f2p+0, 0x1.d43c8eacaa1d6p+0,
      0x1.d5818dcfba487p+0, 0x1.d6c76e862e6d3p+0, 0x1.d80e316c98398p+0, 0x1.d955d71ff6075p+0,
      0x1.da9e603db3285p+0, 0x1.dbe7cd63a8315p+0, 0x1.dd321f301b460p+0, 0x1.de7d5641c0658p+0,
      0x1.dfc97337b9b5fp+0, 0x1.e11676b197d17p+0, 0x1.e264614f5a129p+0, 0x1.e3b333b16ee12p+0,
      0x1.e502ee78b3ff6p+0, 0x1.e653924676d76p+0, 0x1.e7a51fbc74c83p+0, 0x1.e8f7977cdb740p+0,
      0x1.ea4afa2a490dap+0, 0x1.eb9f4867cca6ep+0, 0x1.ecf482d8e67f1p+0, 0x1.ee4aaa2188510p+0,
      0x1.efa1bee615a27p+0, 0x1.f0f9c1cb6412ap+0, 0x1.f252b376bba97p+0, 0x1.f3ac948dd7274p+0,
      0x1.f50765b6e4540p+0, 0x1.f6632798844f8p+0, 0x1.f7bfdad9cbe14p+0, 0x1.f91d802243c89p+0,
      0x1.fa7c1819e90d8p+0, 0x1.fbdba3692d514p+0, 0x1.fd3c22b8f71f1p+0, 0x1.fe9d96b2a23d9p+0};
  constexpr double k256OverLn2 = 0x1.71547652b82fep+8;
  // Adding 1.5 * 2^52 rounds z to the nearest integer k, which then sits in the low bits of
  // the sum.
  constexpr double kRoundToInteger = 0x1.8p52;
  const double z = Mul(x, k256OverLn2);
  const double shifted = Add(z, kRoundToInteger);
  const double r = Sub(z, Sub(shifted, kRoundToInteger));  // exact
  // Horner over (ln2/256)^n / n! for n = 2, 1, 0.
  const double p = Add(Mul(Add(Mul(0x1.ebfbdff82c58fp-19, r), 0x1.62e42fefa39efp-9), r), 1.0);
  // k = 256 m + j: j picks the table entry and m is added to its exponent field (the sum's
  // high bits shift out; m is in [-151, 128], so the result stays a normal double).
  const uint64_t k_bits = DoubleBits(shifted);
  const double scale =
      DoubleFromBits(DoubleBits(kExp2Fraction[k_bits & 255]) + ((k_bits >> 8) << 52));
  return static_cast<float>(Mul(p, scale));
}

// ---------------------------------------------------------------------------------------
// Reductions

// NaN never wins a comparison, so it is ignored; -inf when nothing compares.
BATON_HOST_DEVICE inline float LaneMax(const float* x, size_t n) {
  float m[kLanes];
  for (size_t l = 0; l < kLanes; ++l) m[l] = -INFINITY;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) m[l] = x[i + l] > m[l] ? x[i + l] : m[l];
  }
  for (; i < n; ++i) m[0] = x[i] > m[0] ? x[i] : m[0];
  float max = m[0];
  for (size_t l = 1; l < kLanes; ++l) max = m[l] > max ? m[l] : max;
  return max;
}

// The sum of f(begin) .. f(end - 1): lane l takes every eighth term from begin + l, and
// the lanes combine as a fixed tree.
template <typename F>
BATON_HOST_DEVICE double LaneSum(size_t begin, size_t end, F f) {
  double acc[kLanes] = {};
  size_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) acc[l] += f(i + l);
  }
  for (; i < end; ++i) acc[0] += f(i);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// The first i with x[i] == v; n when there is none. Four compares per loop step, counted
// down, as std::find does it: fewer instructions spent on the loop itself.
BATON_HOST_DEVICE inline size_t FirstIndexOf(const float* x, size_t n, float v) {
  size_t i = 0;
  for (size_t steps = n / 4; steps > 0; --steps, i += 4) {
    if (x[i] == v) return i;
    if (x[i + 1] == v) return i + 1;
    if (x[i + 2] == v) return i + 2;
    if (x[i + 3] == v) return i + 3;
  }
  for (; i < n; ++i) {
    if (x[i] == v) return i;
  }
  return n;
}

// ---------------------------------------------------------------------------------------
// top-k and top-p: prefixes of (logit descending, id ascending)

// Maps a logit to an unsigned key that sorts in descending logit order. -0 and +0 share
// one key, as they compare equal.
BATON_HOST_DEVICE inline uint32_t DescendingKey(float x) {
  const uint32_t bits = FloatBits(x + 0.0f);
  const uint32_t ascending = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return ~ascending;
}

// The last token of a prefix in (key, id) order.
struct Boundary {
  uint32_t key;
  int32_t id;
};

BATON_HOST_DEVICE inline bool InPrefix(uint32_t key, int32_t id, Boundary b) {
  return key < b.key || (key == b.key && id <= b.id);
}

// top-k's weight: every token counts 1. A bucket's weight is then its count, exactly (sums
// of ones below 2^53 are exact in any order), so SelectPrefix skips the double sums.
struct UnitWeight {
  BATON_HOST_DEVICE double operator()(int32_t) const { return 1.0; }
};

// The radix select's levels: key bits 31..21, 20..10 and 9..0.
BATON_HOST_DEVICE constexpr uint32_t RadixShift(int level) {
  return level == 0 ? 21 : level == 1 ? 10 : 0;
}
BATON_HOST_DEVICE constexpr uint32_t RadixMask(int level) { return level < 2 ? 0x7FF : 0x3FF; }

// The last candidate of the shortest prefix, in (logit descending, id) order, whose weight
// reaches `target`; the last candidate of all when none does (rounding at top_p ~ 1).
// `candidates` are in id order and non-empty. A radix select on the 32-bit keys: three
// histogram passes over ever smaller groups replace a sort of up to ~150k tokens. The
// weight before the boundary is summed by buckets, not token by token in sorted order:
// deterministic, and equal to the sorted running sum up to rounding.
template <typename Weight>
BATON_HOST_DEVICE Boundary SelectPrefix(const int32_t* candidates, size_t num_candidates,
                                        const uint32_t* keys, Weight weight, double target,
                                        const Scratch& s) {
  constexpr bool kCountsOnly = std::is_same_v<Weight, UnitWeight>;
  const int32_t* group = candidates;
  size_t size = num_candidates;
  double before = 0;
  for (int level = 0; level < 3; ++level) {
    const uint32_t shift = RadixShift(level);
    const uint32_t mask = RadixMask(level);
    const size_t buckets = size_t{mask} + 1;
    auto bucket = [&](int32_t id) { return (keys[id] >> shift) & mask; };
    for (size_t b = 0; b < buckets; ++b) {
      if constexpr (!kCountsOnly) s.mass[b] = 0.0;
      s.count[b] = 0;
    }
    for (size_t j = 0; j < size; ++j) {
      const uint32_t b = bucket(group[j]);
      if constexpr (!kCountsOnly) s.mass[b] += weight(group[j]);
      ++s.count[b];
    }
    size_t chosen = buckets;
    for (size_t b = 0; b < buckets; ++b) {
      if (s.count[b] == 0) continue;
      const double mass = kCountsOnly ? static_cast<double>(s.count[b]) : s.mass[b];
      if (before + mass >= target) {
        chosen = b;
        break;
      }
      before += mass;
    }
    if (chosen == buckets) {
      Boundary last{keys[group[0]], group[0]};
      for (size_t j = 0; j < size; ++j) {
        const int32_t id = group[j];
        if (!InPrefix(keys[id], id, last)) last = {keys[id], id};
      }
      return last;
    }
    // The chosen bucket's tokens, still in id order: copied out of the candidates at the
    // first level, narrowed in place after that.
    size_t next = 0;
    for (size_t j = 0; j < size; ++j) {
      if (bucket(group[j]) == chosen) s.group[next++] = group[j];
    }
    group = s.group;
    size = next;
  }
  // One key left: ties, in id order.
  const uint32_t key = keys[group[0]];
  for (size_t j = 0; j < size; ++j) {
    before += weight(group[j]);
    if (before >= target) return {key, group[j]};
  }
  return {key, group[size - 1]};
}

// Keeps the candidates inside the prefix that ends at `b`, in order; returns how many.
BATON_HOST_DEVICE inline size_t KeepPrefix(int32_t* cand, size_t n, const uint32_t* keys,
                                           Boundary b) {
  size_t kept = 0;
  for (size_t j = 0; j < n; ++j) {
    if (InPrefix(keys[cand[j]], cand[j], b)) cand[kept++] = cand[j];
  }
  return kept;
}

// ---------------------------------------------------------------------------------------
// The draw

// Inverse CDF over the weights p(0) .. p(n-1) in index order: the first j whose running
// sum exceeds u times the total; n when no weight is positive. Block sums find the block
// first, so only one block is summed one weight at a time.
template <typename P>
BATON_HOST_DEVICE size_t InverseCdf(size_t n, P p, double u, double* blocks) {
  const size_t num_blocks = CdfBlocks(n);
  double total = 0;
  for (size_t b = 0; b < num_blocks; ++b) {
    total += blocks[b] = LaneSum(b * kCdfBlock, Min(n, (b + 1) * kCdfBlock), p);
  }
  const double target = Mul(u, total);
  double cum = 0;
  size_t chosen = num_blocks;
  double cum_before_chosen = 0;
  for (size_t b = 0; b < num_blocks; ++b) {
    if (blocks[b] == 0) continue;
    // Ends on the last block with weight if rounding (u * total == total) carries us past.
    chosen = b;
    cum_before_chosen = cum;
    if (cum + blocks[b] > target) break;
    cum += blocks[b];
  }
  cum = cum_before_chosen;
  size_t last = n;
  for (size_t j = chosen * kCdfBlock; j < Min(n, (chosen + 1) * kCdfBlock); ++j) {
    const double w = p(j);
    if (w == 0) continue;
    cum += w;
    if (cum > target) return j;
    last = j;
  }
  return last;
}

// The token for a row of `vocab` processed logits (no NaN: the caller turns it into -inf),
// the parameters and the step's uniform draw u in [0, 1): docs/sampling.md's steps 4 to 9.
// -1 only if nothing has weight, which cannot happen for such a row (the maximum always
// has probability 1 and survives every filter).
BATON_HOST_DEVICE inline int32_t ChooseToken(const float* w, size_t vocab,
                                             const ChoiceParams& params, double u,
                                             const Scratch& s) {
  const float max = LaneMax(w, vocab);
  // Greedy, and the fallback when nothing is finite to normalise against. The first
  // occurrence of the maximum: ties go to the lowest id.
  if (params.temperature == 0.0 || !IsFinite(max)) {
    return static_cast<int32_t>(FirstIndexOf(w, vocab, max));
  }

  // Capped so that 0 * inv_t stays 0 for the maximum even when 1/T overflows a float.
  const float inv_t = static_cast<float>(Min(1.0 / params.temperature, double{FLT_MAX}));
  auto prob = [&](size_t i) { return Exp((w[i] - max) * inv_t); };
  // Unnormalised: the maximum's probability is exp(0) = 1 exactly, so min_p's threshold
  // min_p * p_max is min_p itself, and top-p compares masses against top_p * total.
  // Clamped so that the maximum always survives, even with unvalidated params.
  const float min_p = static_cast<float>(Min(params.min_p, 1.0));

  const bool top_k = params.top_k > 0 && static_cast<size_t>(params.top_k) < vocab;
  const bool top_p = params.top_p < 1.0;
  if (!top_k && !top_p) {
    // Each probability is computed where the draw reads it (twice in the chosen block),
    // rather than stored by one pass and read back by the next.
    const size_t i = InverseCdf(
        vocab,
        [&](size_t i) {
          const float p = prob(i);
          return p < min_p ? 0.0 : static_cast<double>(p);
        },
        u, s.blocks);
    return i < vocab ? static_cast<int32_t>(i) : -1;
  }

  // top-k and top-p keep prefixes of one strict total order, processed logit descending
  // and ties by lower id, so what they keep is unique. Candidates stay in id order.
  float* probs = s.probs;
  uint32_t* keys = s.keys;
  int32_t* cand = s.cand;
  size_t n = vocab;
  for (size_t i = 0; i < vocab; ++i) {
    keys[i] = DescendingKey(w[i]);
    cand[i] = static_cast<int32_t>(i);
  }
  if (top_k) {
    n = KeepPrefix(cand, n, keys,
                   SelectPrefix(cand, n, keys, UnitWeight{}, static_cast<double>(params.top_k), s));
  }
  for (size_t j = 0; j < n; ++j) probs[cand[j]] = prob(cand[j]);
  if (top_p) {
    auto mass = [&](int32_t id) { return static_cast<double>(probs[id]); };
    const double total = LaneSum(0, n, [&](size_t j) { return mass(cand[j]); });
    n = KeepPrefix(cand, n, keys, SelectPrefix(cand, n, keys, mass, Mul(params.top_p, total), s));
  }
  const size_t j = InverseCdf(
      n,
      [&](size_t j) {
        const float p = probs[cand[j]];
        return p < min_p ? 0.0 : static_cast<double>(p);
      },
      u, s.blocks);
  return j < n ? cand[j] : -1;
}

// ---------------------------------------------------------------------------------------
// Logprobs (of the raw logits, NaN skipped)

// The softmax normaliser as log_z = max + log(sum): the largest logit, and the sum of
// exp(logit - max) over the non-NaN entries.
struct Normaliser {
  float max;
  double sum;
};

BATON_HOST_DEVICE inline Normaliser SoftmaxNormaliser(const float* logits, size_t vocab) {
  const float max = LaneMax(logits, vocab);
  const double sum = LaneSum(0, vocab, [&](size_t i) {
    return IsNan(logits[i]) ? 0.0 : static_cast<double>(Exp(logits[i] - max));
  });
  return {max, sum};
}

// The ids of the n largest logits into best[0, n), largest first and ties by lower id, NaN
// skipped; returns how many (fewer than n only when the row has fewer non-NaN entries). A
// running top-n in one pass (logprobs ask for n <= 20): cheaper than sorting the vocabulary.
BATON_HOST_DEVICE inline size_t TopLogits(const float* logits, size_t vocab, size_t n,
                                          int32_t* best) {
  if (n == 0) return 0;
  auto before = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  size_t size = 0;
  for (size_t i = 0; i < vocab; ++i) {
    const int32_t id = static_cast<int32_t>(i);
    if (IsNan(logits[id])) continue;
    if (size == n && !before(id, best[n - 1])) continue;
    // Into the free slot, or over the last when full, then moved up past what it precedes.
    size_t pos = size < n ? size++ : n - 1;
    for (; pos > 0 && before(id, best[pos - 1]); --pos) best[pos] = best[pos - 1];
    best[pos] = id;
  }
  return size;
}

}  // namespace baton::kernels::sampling
