// CudaGpuOps against the host emulation of the same contract (tests/fakes/host_gpu_ops.h),
// call by call, on the same random inputs (ggml's test-backend-ops, for kernels::GpuOps):
// where the contract's words leave a doubt, the emulation is the reference. Each buffer
// lives in both implementations' memory ("twins"); outputs start as 0xff bytes (NaN) in
// both, so an element one side writes and the other does not shows.
//
// Tolerances: bf16 outputs within 1 bf16 ulp (both round to nearest even from f32 values
// that differ in the last f32 bits: a sum order, rsqrtf, expf); copies, gathers, adds,
// conversions and the KV write bit for bit; f32 outputs as each test states. Skipped,
// with a message, where no GPU is visible.
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "gtest/gtest.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cuda/cuda_gpu_ops.h"
#include "kernels/gpu_ops.h"
#include "tests/fakes/host_gpu_ops.h"
#include "tests/gpu/gpu_test_util.h"

namespace baton::kernels::cuda {
namespace {

using fakes::HostGpuOps;

#define CONTRACT_ASSERT_OK(expr)                                             \
  do {                                                                       \
    const absl::Status contract_status_ = (expr);                            \
    ASSERT_TRUE(contract_status_.ok()) << #expr << ": " << contract_status_; \
  } while (false)

std::vector<float> RandomFloats(size_t n, std::mt19937& rng, float lo = -2.0f, float hi = 2.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<Bf16Bits> RandomBf16(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::vector<Bf16Bits> v(n);
  const std::vector<float> f = RandomFloats(n, rng, lo, hi);
  for (size_t i = 0; i < n; ++i) v[i] = cpu::FloatToBf16(f[i]).bits;
  return v;
}

float BitsToFloat(Bf16Bits b) { return cpu::Bf16ToFloat(cpu::Bf16{b}); }

bool IsNanBf16(Bf16Bits b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; }

// bf16 bits as integers in value order (sign-magnitude to two's complement), so that
// neighbours differ by 1.
int Bf16Ordinal(Bf16Bits b) { return (b & 0x8000) != 0 ? -static_cast<int>(b & 0x7fff) : b; }

constexpr int kMaxReported = 10;  // mismatches reported per comparison

// The bits of a value, as an unsigned integer of its size (NaN == NaN when they match).
template <typename T>
auto Bits(T v) {
  if constexpr (sizeof(T) == 4) {
    return std::bit_cast<uint32_t>(v);
  } else if constexpr (sizeof(T) == 2) {
    return std::bit_cast<uint16_t>(v);
  } else {
    static_assert(sizeof(T) == 1);
    return std::bit_cast<uint8_t>(v);
  }
}

template <typename T>
void ExpectSameBits(const std::vector<T>& cuda, const std::vector<T>& host,
                    const std::string& what) {
  ASSERT_EQ(cuda.size(), host.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < cuda.size() && reported < kMaxReported; ++i) {
    if (Bits(cuda[i]) != Bits(host[i])) {
      ADD_FAILURE() << what << " at " << i << ": cuda " << +cuda[i] << ", host " << +host[i];
      ++reported;
    }
  }
}

void ExpectBf16Near(const std::vector<Bf16Bits>& cuda, const std::vector<Bf16Bits>& host, int ulps,
                    const std::string& what) {
  ASSERT_EQ(cuda.size(), host.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < cuda.size() && reported < kMaxReported; ++i) {
    const bool both_nan = IsNanBf16(cuda[i]) && IsNanBf16(host[i]);  // untouched by both
    const bool one_nan = IsNanBf16(cuda[i]) != IsNanBf16(host[i]);
    if (!both_nan && (one_nan || std::abs(Bf16Ordinal(cuda[i]) - Bf16Ordinal(host[i])) > ulps)) {
      ADD_FAILURE() << what << " at " << i << ": cuda " << BitsToFloat(cuda[i]) << " (0x"
                    << std::hex << cuda[i] << "), host " << BitsToFloat(host[i]) << " (0x"
                    << host[i] << std::dec << ")";
      ++reported;
    }
  }
}

// |cuda - host| <= abs + rel * |host|; NaN only where both are NaN (untouched by both).
void ExpectF32Near(const std::vector<float>& cuda, const std::vector<float>& host, double abs,
                   double rel, const std::string& what) {
  ASSERT_EQ(cuda.size(), host.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < cuda.size() && reported < kMaxReported; ++i) {
    const bool both_nan = std::isnan(cuda[i]) && std::isnan(host[i]);
    const double err = std::fabs(static_cast<double>(cuda[i]) - host[i]);
    if (!both_nan && !(err <= abs + rel * std::fabs(host[i]))) {
      ADD_FAILURE() << what << " at " << i << ": cuda " << cuda[i] << ", host " << host[i];
      ++reported;
    }
  }
}

// One buffer in each implementation's device memory.
template <typename T>
struct Twin {
  GpuBuffer c, h;
  size_t size = 0;
  T* cuda() const { return c.as<T>(); }
  T* host() const { return h.as<T>(); }
};

class GpuOpsContractTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BATON_SKIP_WITHOUT_GPU();
    auto ops = CudaGpuOps::Create(0, /*batch_invariant=*/true);
    ASSERT_TRUE(ops.ok()) << ops.status();
    cuda_ = std::move(*ops);
  }

  static GpuBuffer Alloc(GpuOps* ops, size_t bytes) {
    auto b = GpuBuffer::Allocate(ops, static_cast<int64_t>(std::max<size_t>(bytes, 1)));
    EXPECT_TRUE(b.ok()) << ops->name() << ": " << b.status();
    return b.ok() ? std::move(*b) : GpuBuffer();
  }

  // `values` in both (and waits for the copies, so that `values` may go).
  template <typename T>
  Twin<T> Put(const std::vector<T>& values) {
    Twin<T> t;
    t.size = values.size();
    const size_t bytes = values.size() * sizeof(T);
    t.c = Alloc(cuda_.get(), bytes);
    t.h = Alloc(&host_, bytes);
    const absl::Status sc = cuda_->CopyToDevice(t.c.get(), values.data(), bytes);
    const absl::Status sh = host_.CopyToDevice(t.h.get(), values.data(), bytes);
    EXPECT_TRUE(sc.ok()) << sc;
    EXPECT_TRUE(sh.ok()) << sh;
    EXPECT_TRUE(cuda_->Synchronize().ok());
    return t;
  }

  // `size` elements of 0xff bytes in both: NaN as f32 and as bf16.
  template <typename T>
  Twin<T> Poisoned(size_t size) {
    Twin<T> t;
    t.size = size;
    t.c = Alloc(cuda_.get(), size * sizeof(T));
    t.h = Alloc(&host_, size * sizeof(T));
    EXPECT_TRUE(cuda_->Memset(t.c.get(), 0xff, static_cast<int64_t>(size * sizeof(T))).ok());
    EXPECT_TRUE(host_.Memset(t.h.get(), 0xff, static_cast<int64_t>(size * sizeof(T))).ok());
    return t;
  }

  template <typename T>
  static std::vector<T> Read(GpuOps* ops, const GpuBuffer& b, size_t size) {
    std::vector<T> out(size);
    const absl::Status s = ops->CopyToHost(out.data(), b.get(), size * sizeof(T));
    EXPECT_TRUE(s.ok()) << ops->name() << ": " << s;
    return out;
  }
  template <typename T>
  std::vector<T> ReadCuda(const Twin<T>& t) {
    return Read<T>(cuda_.get(), t.c, t.size);
  }
  template <typename T>
  std::vector<T> ReadHost(const Twin<T>& t) {
    return Read<T>(&host_, t.h, t.size);
  }

  std::unique_ptr<CudaGpuOps> cuda_;
  HostGpuOps host_;
};

TEST_F(GpuOpsContractTest, MemoryCallsRoundTripAndRefuseWhatTheyCannotGive) {
  EXPECT_EQ(std::string(cuda_->name()).rfind("cuda:0 ", 0), 0u) << cuda_->name();
  auto p = cuda_->Malloc(1000);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 256, 0u);
  cuda_->Free(*p);

  // Free memory drops by at least what a Malloc takes (cudaMemGetInfo rounds to pages).
  constexpr int64_t kChunk = int64_t{256} << 20;
  const auto before = cuda_->FreeMemoryBytes();
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_GT(*before, kChunk);
  auto chunk = cuda_->Malloc(kChunk);
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  const auto after = cuda_->FreeMemoryBytes();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GE(*before - *after, kChunk);
  cuda_->Free(*chunk);

  // 1 PiB: refused, naming the bytes; the failure must not leak into the next launch check.
  const auto huge = cuda_->Malloc(int64_t{1} << 50);
  ASSERT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  EXPECT_NE(huge.status().message().find("1125899906842624"), std::string::npos) << huge.status();

  // Pinned host -> device -> device -> host, a memset over part of it.
  auto pinned = cuda_->MallocHost(4096);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  auto* bytes = static_cast<uint8_t*>(*pinned);
  for (int i = 0; i < 4096; ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  GpuBuffer a = Alloc(cuda_.get(), 4096), b = Alloc(cuda_.get(), 4096);
  CONTRACT_ASSERT_OK(cuda_->CopyToDevice(a.get(), bytes, 4096));
  CONTRACT_ASSERT_OK(cuda_->CopyOnDevice(b.get(), a.get(), 4096));
  CONTRACT_ASSERT_OK(cuda_->Memset(b.as<uint8_t>() + 100, 0x5a, 50));
  CONTRACT_ASSERT_OK(cuda_->CopyToDevice(a.get(), bytes, 0));  // nothing to copy
  std::vector<uint8_t> back(4096);
  CONTRACT_ASSERT_OK(cuda_->CopyToHost(back.data(), b.get(), 4096));
  for (int i = 0; i < 4096; ++i) {
    ASSERT_EQ(back[i], i >= 100 && i < 150 ? 0x5a : static_cast<uint8_t>(i * 7 + 3)) << i;
  }
  cuda_->FreeHost(*pinned);

  // A kernel call after the refused Malloc: its launch check sees only its own launch.
  GpuBuffer f = Alloc(cuda_.get(), 16 * sizeof(float));
  CONTRACT_ASSERT_OK(cuda_->Memset(f.get(), 0, 16 * sizeof(float)));
  CONTRACT_ASSERT_OK(cuda_->Add(f.as<float>(), f.as<float>(), 16));
  CONTRACT_ASSERT_OK(cuda_->Synchronize());
  EXPECT_EQ(cuda_->DecodeWorkspaceBytes(3, 8, 64, 700), host_.DecodeWorkspaceBytes(3, 8, 64, 700));
}

TEST_F(GpuOpsContractTest, EmbedGivesTheShardsRowsAndZerosForOthers) {
  struct Case {
    int64_t rows, first_row;
    int dim;
    std::vector<int32_t> ids;
  };
  std::mt19937 rng(1);
  for (const Case& c : {Case{50, 0, 96, {3, 0, 49, 3, 50, -1}},
                        Case{37, 100, 33, {99, 100, 136, 137, 5, 120, -7, 100}},
                        Case{1000, 1000, 256, {1999, 2000, 999, 1000, 0}}}) {
    const auto table = Put(RandomBf16(static_cast<size_t>(c.rows * c.dim), rng));
    const auto ids = Put(c.ids);
    const int tokens = static_cast<int>(c.ids.size());
    auto out = Poisoned<float>(static_cast<size_t>(tokens) * c.dim);
    CONTRACT_ASSERT_OK(
        cuda_->Embed(table.cuda(), c.rows, c.first_row, c.dim, ids.cuda(), tokens, out.cuda()));
    CONTRACT_ASSERT_OK(
        host_.Embed(table.host(), c.rows, c.first_row, c.dim, ids.host(), tokens, out.host()));
    ExpectSameBits(ReadCuda(out), ReadHost(out), "Embed dim " + std::to_string(c.dim));
  }
}

TEST_F(GpuOpsContractTest, RmsNormWritesBf16WithinOneUlp) {
  std::mt19937 rng(2);
  for (const int n : {64, 577, 2048, 4097}) {
    for (const int rows : {1, 7}) {
      const auto x = Put(RandomFloats(static_cast<size_t>(rows) * n, rng));
      const auto w = Put(RandomFloats(n, rng, 0.5f, 1.5f));
      auto out = Poisoned<Bf16Bits>(static_cast<size_t>(rows) * n);
      CONTRACT_ASSERT_OK(cuda_->RmsNorm(x.cuda(), w.cuda(), rows, n, 1e-5f, out.cuda()));
      CONTRACT_ASSERT_OK(host_.RmsNorm(x.host(), w.host(), rows, n, 1e-5f, out.host()));
      const std::vector<Bf16Bits> all = ReadCuda(out);
      ExpectBf16Near(all, ReadHost(out), 1,
                     "RmsNorm n=" + std::to_string(n) + " rows=" + std::to_string(rows));
      if (rows == 7) {
        // Row 4 alone: the bits it had in the batch (the fixed reduction tree).
        auto one = Poisoned<Bf16Bits>(n);
        CONTRACT_ASSERT_OK(
            cuda_->RmsNorm(x.cuda() + int64_t{4} * n, w.cuda(), 1, n, 1e-5f, one.cuda()));
        const std::vector<Bf16Bits> alone = ReadCuda(one);
        ExpectSameBits(alone, std::vector<Bf16Bits>(all.begin() + 4 * n, all.begin() + 5 * n),
                       "RmsNorm row alone vs in a batch, n=" + std::to_string(n));
      }
    }
  }
}

TEST_F(GpuOpsContractTest, AddRmsNormAddsExactlyAndNormsWithinOneUlp) {
  std::mt19937 rng(3);
  for (const int n : {33, 960, 4097}) {
    const int rows = 5;
    const auto residual = Put(RandomFloats(static_cast<size_t>(rows) * n, rng));
    const auto x = Put(RandomFloats(static_cast<size_t>(rows) * n, rng));
    const auto w = Put(RandomFloats(n, rng, 0.5f, 1.5f));
    auto out = Poisoned<Bf16Bits>(static_cast<size_t>(rows) * n);
    CONTRACT_ASSERT_OK(
        cuda_->AddRmsNorm(residual.cuda(), x.cuda(), w.cuda(), rows, n, 1e-6f, out.cuda()));
    CONTRACT_ASSERT_OK(
        host_.AddRmsNorm(residual.host(), x.host(), w.host(), rows, n, 1e-6f, out.host()));
    const std::string what = " n=" + std::to_string(n);
    ExpectSameBits(ReadCuda(residual), ReadHost(residual), "AddRmsNorm residual" + what);
    ExpectBf16Near(ReadCuda(out), ReadHost(out), 1, "AddRmsNorm out" + what);
  }
}

TEST_F(GpuOpsContractTest, GatherRowsAndAddAreExact) {
  std::mt19937 rng(4);
  for (const int n : {1, 100, 2049}) {
    const auto x = Put(RandomFloats(static_cast<size_t>(10) * n, rng));
    const std::vector<int32_t> picked = {3, 0, 9, 3};
    const auto rows = Put(picked);
    auto out = Poisoned<float>(picked.size() * n);
    CONTRACT_ASSERT_OK(cuda_->GatherRows(x.cuda(), n, rows.cuda(), 4, out.cuda()));
    CONTRACT_ASSERT_OK(host_.GatherRows(x.host(), n, rows.host(), 4, out.host()));
    ExpectSameBits(ReadCuda(out), ReadHost(out), "GatherRows n=" + std::to_string(n));
  }
  for (const int64_t n : {int64_t{1}, int64_t{1000}, int64_t{3 * 8192 + 5}}) {
    const auto residual = Put(RandomFloats(static_cast<size_t>(n), rng));
    const auto x = Put(RandomFloats(static_cast<size_t>(n), rng));
    CONTRACT_ASSERT_OK(cuda_->Add(residual.cuda(), x.cuda(), n));
    CONTRACT_ASSERT_OK(host_.Add(residual.host(), x.host(), n));
    ExpectSameBits(ReadCuda(residual), ReadHost(residual), "Add n=" + std::to_string(n));
  }
}

TEST_F(GpuOpsContractTest, LinearMatchesInBothGemmModes) {
  auto plain = CudaGpuOps::Create(0, /*batch_invariant=*/false);
  ASSERT_TRUE(plain.ok()) << plain.status();
  struct Shape {
    int m, n, k;
    bool bias;
  };
  std::mt19937 rng(5);
  for (const Shape s : {Shape{1, 2048, 2048, true}, Shape{7, 576, 1536, false},
                        Shape{37, 100, 64, true}, Shape{128, 256, 64, false}}) {
    const std::vector<Bf16Bits> xv = RandomBf16(static_cast<size_t>(s.m) * s.k, rng);
    const std::vector<Bf16Bits> wv = RandomBf16(static_cast<size_t>(s.n) * s.k, rng);
    const std::vector<float> bv = RandomFloats(s.n, rng);
    // The tolerance of each output: f32 accumulation over k, relative to the sum of the
    // terms' magnitudes (1e-5 of it is ~80 f32 ulps), plus the bias add's rounding.
    std::vector<float> bound(static_cast<size_t>(s.m) * s.n);
    for (int i = 0; i < s.m; ++i) {
      for (int j = 0; j < s.n; ++j) {
        double sum = 0;
        for (int c = 0; c < s.k; ++c) {
          sum += std::fabs(static_cast<double>(BitsToFloat(xv[int64_t{i} * s.k + c])) *
                           BitsToFloat(wv[int64_t{j} * s.k + c]));
        }
        bound[int64_t{i} * s.n + j] =
            static_cast<float>(1e-5 * sum + (s.bias ? 1e-6 * std::fabs(bv[j]) : 0.0) + 1e-30);
      }
    }
    const auto x = Put(xv), w = Put(wv);
    const auto bias = Put(bv);
    auto out = Poisoned<float>(static_cast<size_t>(s.m) * s.n);
    CONTRACT_ASSERT_OK(host_.Linear(x.host(), w.host(), s.bias ? bias.host() : nullptr, s.m, s.n,
                                    s.k, out.host()));
    const std::vector<float> want = ReadHost(out);
    for (CudaGpuOps* ops : {cuda_.get(), plain->get()}) {
      CONTRACT_ASSERT_OK(ops->Memset(out.cuda(), 0xff, static_cast<int64_t>(out.size * 4)));
      CONTRACT_ASSERT_OK(ops->Linear(x.cuda(), w.cuda(), s.bias ? bias.cuda() : nullptr, s.m, s.n,
                                     s.k, out.cuda()));
      const std::vector<float> got = Read<float>(ops, out.c, out.size);
      int reported = 0;
      for (size_t i = 0; i < got.size() && reported < kMaxReported; ++i) {
        if (!(std::fabs(static_cast<double>(got[i]) - want[i]) <= bound[i])) {
          ADD_FAILURE() << "Linear " << s.m << "x" << s.n << "x" << s.k
                        << (ops == cuda_.get() ? " batch-invariant" : "") << " at " << i
                        << ": cuda " << got[i] << ", host " << want[i] << ", bound " << bound[i];
          ++reported;
        }
      }
    }
  }
}

TEST_F(GpuOpsContractTest, RopeQkTurnsQueryAndKeyHeadsOfStridedRows) {
  struct Case {
    int tokens, q_heads, kv_heads, head_dim;
  };
  std::mt19937 rng(6);
  constexpr int kPositions = 64;
  for (const Case c :
       {Case{5, 8, 2, 64}, Case{3, 4, 4, 128}, Case{4, 3, 1, 32}, Case{2, 1, 1, 2}}) {
    for (const bool interleaved : {false, true}) {
      const int half = c.head_dim / 2;
      // Fused qkv rows (V after K, untouched) with a few floats of slack at the end.
      const int64_t row_stride = int64_t{c.q_heads + 2 * c.kv_heads} * c.head_dim + 8;
      const auto qkv = Put(RandomFloats(static_cast<size_t>(c.tokens * row_stride), rng));
      std::vector<float> cos_table(kPositions * half), sin_table(kPositions * half);
      for (int p = 0; p < kPositions; ++p) {
        for (int i = 0; i < half; ++i) {
          const double angle = p * std::pow(10000.0, -2.0 * i / c.head_dim);
          cos_table[p * half + i] = static_cast<float>(std::cos(angle));
          sin_table[p * half + i] = static_cast<float>(std::sin(angle));
        }
      }
      std::vector<int32_t> pos(c.tokens);
      for (int32_t& p : pos) p = static_cast<int32_t>(rng() % kPositions);
      const auto positions = Put(pos);
      const auto cosines = Put(cos_table), sines = Put(sin_table);
      CONTRACT_ASSERT_OK(cuda_->RopeQk(qkv.cuda(), c.tokens, row_stride, c.q_heads, c.kv_heads,
                                       c.head_dim, positions.cuda(), cosines.cuda(), sines.cuda(),
                                       interleaved));
      CONTRACT_ASSERT_OK(host_.RopeQk(qkv.host(), c.tokens, row_stride, c.q_heads, c.kv_heads,
                                      c.head_dim, positions.host(), cosines.host(), sines.host(),
                                      interleaved));
      // nvcc contracts a * c - b * s into one fma, the host compiler does not: a rounding
      // of the larger product apart (inputs under 2 in magnitude).
      ExpectF32Near(ReadCuda(qkv), ReadHost(qkv), 1e-6, 1e-6,
                    "RopeQk head_dim " + std::to_string(c.head_dim) +
                        (interleaved ? " interleaved" : " half-split"));
    }
  }
}

TEST_F(GpuOpsContractTest, SwiGluAndToBf16) {
  std::mt19937 rng(7);
  for (const int inter : {1, 257, 8192}) {
    for (const int rows : {1, 3}) {
      const auto gate_up = Put(RandomFloats(static_cast<size_t>(rows) * 2 * inter, rng, -8, 8));
      auto out = Poisoned<Bf16Bits>(static_cast<size_t>(rows) * inter);
      CONTRACT_ASSERT_OK(cuda_->SwiGlu(gate_up.cuda(), rows, inter, out.cuda()));
      CONTRACT_ASSERT_OK(host_.SwiGlu(gate_up.host(), rows, inter, out.host()));
      ExpectBf16Near(ReadCuda(out), ReadHost(out), 1, "SwiGlu inter=" + std::to_string(inter));
    }
  }
  for (const int64_t n : {int64_t{1}, int64_t{1001}, int64_t{100000}}) {
    std::vector<float> x = RandomFloats(static_cast<size_t>(n), rng, -1e4f, 1e4f);
    // Ties (to even, down and up), signed zeros, infinities, a subnormal, the largest
    // finite value (rounds to infinity).
    const std::vector<float> special = {1.0f + 0x1p-8f,
                                        1.0f + 3 * 0x1p-8f,
                                        -0.0f,
                                        0.0f,
                                        std::numeric_limits<float>::infinity(),
                                        -std::numeric_limits<float>::infinity(),
                                        1e-40f,
                                        std::numeric_limits<float>::max()};
    for (size_t i = 0; i < special.size() && i < x.size(); ++i) x[i] = special[i];
    const auto in = Put(x);
    auto out = Poisoned<Bf16Bits>(static_cast<size_t>(n));
    CONTRACT_ASSERT_OK(cuda_->ToBf16(in.cuda(), n, out.cuda()));
    CONTRACT_ASSERT_OK(host_.ToBf16(in.host(), n, out.host()));
    ExpectSameBits(ReadCuda(out), ReadHost(out), "ToBf16 n=" + std::to_string(n));
  }
}

TEST_F(GpuOpsContractTest, ArgMaxTakesTheLowestIdOfTheMaximumAndNeverNaN) {
  std::mt19937 rng(8);
  for (const int64_t vocab : {int64_t{1}, int64_t{300}, int64_t{128256}}) {
    const int rows = 5;
    std::vector<float> x = RandomFloats(static_cast<size_t>(vocab * rows), rng, -30, 30);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    if (vocab > 2) {
      x[2] = x[1] = 100.0f;          // row 0: a tie, the lower id wins
      x[vocab] = nan;                // row 1: NaN first, ignored
      x[vocab + vocab - 1] = 99.0f;  // and the maximum last
    }
    for (int64_t i = 0; i < vocab; ++i) x[2 * vocab + i] = nan;  // row 2: all NaN
    const auto in = Put(x);
    auto ids = Poisoned<int32_t>(rows);
    CONTRACT_ASSERT_OK(cuda_->ArgMax(in.cuda(), vocab, rows, ids.cuda()));
    CONTRACT_ASSERT_OK(host_.ArgMax(in.host(), vocab, rows, ids.host()));
    ExpectSameBits(ReadCuda(ids), ReadHost(ids), "ArgMax vocab=" + std::to_string(vocab));
    EXPECT_EQ(ReadHost(ids)[2], vocab) << "an all-NaN row";
  }
}

// --- attention over pages ---

struct KvShape {
  int kv_heads, group, head_dim;
  bool bf16;
  int block_size = 16;
  int q_heads() const { return kv_heads * group; }
  // Fused qkv rows: q heads, then K, then V.
  int64_t qkv_stride() const { return int64_t{q_heads() + 2 * kv_heads} * head_dim; }
  std::string Name() const {
    return "kv_heads=" + std::to_string(kv_heads) + " group=" + std::to_string(group) +
           " head_dim=" + std::to_string(head_dim) + (bf16 ? " bf16" : " f32");
  }
};

// One layer (the second of two, so that its base is not the pool's) of pages in both
// implementations, in kvcache/page_layout.h's layout, poisoned; sequence s's pages are
// tables[s * max_blocks ...], drawn from a shuffled pool.
struct PagedContexts {
  Twin<uint8_t> pool;
  GpuKvLayer cuda_kv, host_kv;
  std::vector<int32_t> tables;
  int max_blocks = 0;
};

class GpuOpsAttentionTest : public GpuOpsContractTest {
 protected:
  PagedContexts MakePages(const KvShape& s, int num_seqs, int max_context, std::mt19937& rng) {
    PagedContexts p;
    p.max_blocks = (max_context + s.block_size - 1) / s.block_size;
    const int num_pages = num_seqs * p.max_blocks + 3;
    std::vector<int32_t> pages(num_pages);
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng);
    p.tables.assign(pages.begin(), pages.begin() + num_seqs * p.max_blocks);
    const int64_t rows = int64_t{s.block_size} * s.head_dim, head_stride = 2 * rows;
    const int64_t page_stride = 2 * s.kv_heads * head_stride;  // 2 layers
    const int64_t elem = s.bf16 ? 2 : 4;
    p.pool = Poisoned<uint8_t>(static_cast<size_t>(num_pages * page_stride * elem));
    GpuKvLayer kv;
    kv.bf16 = s.bf16;
    kv.page_stride = page_stride;
    kv.head_stride = head_stride;
    kv.rows = rows;
    kv.block_size = s.block_size;
    kv.head_dim = s.head_dim;
    const int64_t layer_offset = s.kv_heads * head_stride * elem;  // layer 1 of the page
    p.cuda_kv = kv;
    p.cuda_kv.base = p.pool.cuda() + layer_offset;
    p.host_kv = kv;
    p.host_kv.base = p.pool.host() + layer_offset;
    return p;
  }

  // Writes positions [0, contexts[s]) of each sequence through WriteKv in both, from the
  // K and V parts of fused qkv rows, with two padding slots among them; the pools must then
  // hold the same bits.
  void WriteContexts(const KvShape& s, PagedContexts& p, const std::vector<int32_t>& contexts,
                     std::mt19937& rng) {
    std::vector<int32_t> slot_pages, slot_rows;
    for (size_t seq = 0; seq < contexts.size(); ++seq) {
      for (int pos = 0; pos < contexts[seq]; ++pos) {
        slot_pages.push_back(p.tables[seq * p.max_blocks + pos / s.block_size]);
        slot_rows.push_back(pos % s.block_size);
        if (slot_pages.size() == 5) {  // padding: a negative page, then a negative row
          slot_pages.push_back(-1);
          slot_rows.push_back(3);
          slot_pages.push_back(p.tables[0]);
          slot_rows.push_back(-1);
        }
      }
    }
    const int tokens = static_cast<int>(slot_pages.size());
    const auto qkv = Put(RandomFloats(static_cast<size_t>(tokens * s.qkv_stride()), rng, -1, 1));
    const auto pages = Put(slot_pages), rows = Put(slot_rows);
    const int64_t k_offset = int64_t{s.q_heads()} * s.head_dim;
    const int64_t v_offset = k_offset + int64_t{s.kv_heads} * s.head_dim;
    ASSERT_TRUE(cuda_
                    ->WriteKv(p.cuda_kv, s.kv_heads, qkv.cuda() + k_offset, qkv.cuda() + v_offset,
                              s.qkv_stride(), pages.cuda(), rows.cuda(), tokens)
                    .ok());
    ASSERT_TRUE(host_
                    .WriteKv(p.host_kv, s.kv_heads, qkv.host() + k_offset, qkv.host() + v_offset,
                             s.qkv_stride(), pages.host(), rows.host(), tokens)
                    .ok());
    ExpectSameBits(ReadCuda(p.pool), ReadHost(p.pool), "WriteKv pages " + s.Name());
  }

  // Decode over `lens` (0: a padding sequence): the queries are a shuffled subset of the
  // rows of a fused qkv batch with two rows more than sequences.
  void CheckDecode(const KvShape& s, const std::vector<int32_t>& lens, uint32_t seed) {
    SCOPED_TRACE("decode " + s.Name());
    std::mt19937 rng(seed);
    const int num_seqs = static_cast<int>(lens.size());
    const int max_context = *std::max_element(lens.begin(), lens.end()) + 5;
    PagedContexts p = MakePages(s, num_seqs, max_context, rng);
    WriteContexts(s, p, lens, rng);
    const int rows = num_seqs + 2;
    std::vector<int32_t> order(rows);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const std::vector<int32_t> q_rows_v(order.begin(), order.begin() + num_seqs);
    const auto q = Put(RandomFloats(static_cast<size_t>(rows * s.qkv_stride()), rng, -1, 1));
    const auto q_rows = Put(q_rows_v), context_lens = Put(lens), tables = Put(p.tables);
    const int64_t width = int64_t{s.q_heads()} * s.head_dim;
    auto out = Poisoned<float>(static_cast<size_t>(rows * width));
    const int64_t workspace_bytes =
        cuda_->DecodeWorkspaceBytes(num_seqs, s.q_heads(), s.head_dim, max_context);
    ASSERT_EQ(workspace_bytes,
              host_.DecodeWorkspaceBytes(num_seqs, s.q_heads(), s.head_dim, max_context));
    const auto workspace = Poisoned<uint8_t>(static_cast<size_t>(workspace_bytes));
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    CONTRACT_ASSERT_OK(cuda_->DecodeAttention(q.cuda(), s.qkv_stride(), q_rows.cuda(), p.cuda_kv,
                                              tables.cuda(), p.max_blocks, context_lens.cuda(),
                                              num_seqs, s.q_heads(), s.kv_heads, max_context, scale,
                                              workspace.cuda(), out.cuda()));
    CONTRACT_ASSERT_OK(host_.DecodeAttention(q.host(), s.qkv_stride(), q_rows.host(), p.host_kv,
                                             tables.host(), p.max_blocks, context_lens.host(),
                                             num_seqs, s.q_heads(), s.kv_heads, max_context, scale,
                                             workspace.host(), out.host()));
    // Outputs are convex combinations of V values under 1; f32 scores and sums over up to
    // 1000 positions against the emulation's float64 (paged_attention_test's bound).
    ExpectF32Near(ReadCuda(out), ReadHost(out), 2e-5, 0, "DecodeAttention out");
  }

  // Prefill of (cached, new) chunks, each sequence's new tokens contiguous rows of a fused
  // qkv batch.
  void CheckPrefill(const KvShape& s, const std::vector<std::pair<int, int>>& chunks,
                    uint32_t seed) {
    SCOPED_TRACE("prefill " + s.Name());
    std::mt19937 rng(seed);
    std::vector<int32_t> ctx, qlen, qstart;
    int tokens = 0, max_q = 0;
    for (const auto& [cached, fresh] : chunks) {
      ctx.push_back(cached + fresh);
      qlen.push_back(fresh);
      qstart.push_back(tokens);
      tokens += fresh;
      max_q = std::max(max_q, fresh);
    }
    const int num_seqs = static_cast<int>(chunks.size());
    PagedContexts p = MakePages(s, num_seqs, *std::max_element(ctx.begin(), ctx.end()), rng);
    WriteContexts(s, p, ctx, rng);
    const auto q = Put(RandomFloats(static_cast<size_t>(tokens * s.qkv_stride()), rng, -1, 1));
    const auto starts = Put(qstart), lens = Put(qlen), contexts = Put(ctx), tables = Put(p.tables);
    const int64_t width = int64_t{s.q_heads()} * s.head_dim;
    auto out = Poisoned<float>(static_cast<size_t>(tokens * width));
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    CONTRACT_ASSERT_OK(cuda_->PrefillAttention(
        q.cuda(), s.qkv_stride(), p.cuda_kv, tables.cuda(), p.max_blocks, starts.cuda(),
        lens.cuda(), contexts.cuda(), num_seqs, max_q, s.q_heads(), s.kv_heads, scale, out.cuda()));
    CONTRACT_ASSERT_OK(host_.PrefillAttention(
        q.host(), s.qkv_stride(), p.host_kv, tables.host(), p.max_blocks, starts.host(),
        lens.host(), contexts.host(), num_seqs, max_q, s.q_heads(), s.kv_heads, scale, out.host()));
    ExpectF32Near(ReadCuda(out), ReadHost(out), 2e-5, 0, "PrefillAttention out");
  }
};

TEST_F(GpuOpsAttentionTest, DecodeMatchesTheEmulation) {
  // Contexts inside a page, on a split boundary, just past one, across several; padding
  // sequences (0) among them.
  CheckDecode({.kv_heads = 8, .group = 1, .head_dim = 64, .bf16 = false}, {1, 17, 0, 256, 257, 700},
              11);
  CheckDecode({.kv_heads = 4, .group = 2, .head_dim = 128, .bf16 = true}, {129, 0, 64, 513}, 12);
  CheckDecode({.kv_heads = 2, .group = 4, .head_dim = 64, .bf16 = true}, {1000, 3, 256}, 13);
  CheckDecode({.kv_heads = 1, .group = 8, .head_dim = 128, .bf16 = false}, {300, 31, 0}, 14);
}

TEST_F(GpuOpsAttentionTest, PrefillMatchesTheEmulation) {
  // (cached prefix, new tokens): a whole prompt, chunks after cached prefixes, one token,
  // and a sequence with no new token (padding).
  CheckPrefill({.kv_heads = 8, .group = 1, .head_dim = 64, .bf16 = false},
               {{0, 37}, {20, 16}, {300, 5}, {5, 1}, {7, 0}}, 21);
  CheckPrefill({.kv_heads = 4, .group = 2, .head_dim = 128, .bf16 = true},
               {{0, 37}, {20, 16}, {64, 70}}, 22);
  CheckPrefill({.kv_heads = 2, .group = 4, .head_dim = 64, .bf16 = true}, {{0, 20}, {100, 33}}, 23);
  CheckPrefill({.kv_heads = 1, .group = 8, .head_dim = 128, .bf16 = false}, {{17, 16}, {0, 1}}, 24);
}

// --- graphs ---

// What one replay (or direct run) of the captured sequence left.
struct StepResult {
  std::vector<Bf16Bits> normed, out;
  std::vector<float> projected, residual;
};

// The buffers of a short step on one GpuOps: the input arrives in pinned memory, is
// copied up and moved on the device, normed, projected (with a bias) and added to the
// residual, which is normed again.
class Step {
 public:
  static constexpr int kRows = 3, kN = 256;
  static constexpr int64_t kFloats = int64_t{kRows} * kN;

  Step(GpuOps* ops, std::mt19937& rng) : ops_(ops) {
    auto pinned = ops->MallocHost(kFloats * 4);
    EXPECT_TRUE(pinned.ok()) << pinned.status();
    staging_ = static_cast<float*>(pinned.ok() ? *pinned : nullptr);
    for (GpuBuffer* b : {&x_, &x_moved_, &projected_, &residual_}) *b = Alloc(kFloats * 4);
    for (GpuBuffer* b : {&normed_, &out_}) *b = Alloc(kFloats * 2);
    norm_weight_ = Alloc(kN * 4);
    weight_ = Alloc(int64_t{kN} * kN * 2);
    bias_ = Alloc(kN * 4);
    const std::vector<float> nw = RandomFloats(kN, rng, 0.5f, 1.5f), bias = RandomFloats(kN, rng);
    const std::vector<Bf16Bits> w = RandomBf16(static_cast<size_t>(kN) * kN, rng);
    residual_start_ = RandomFloats(kFloats, rng);
    EXPECT_TRUE(ops->CopyToDevice(norm_weight_.get(), nw.data(), kN * 4).ok());
    EXPECT_TRUE(ops->CopyToDevice(bias_.get(), bias.data(), kN * 4).ok());
    EXPECT_TRUE(ops->CopyToDevice(weight_.get(), w.data(), int64_t{kN} * kN * 2).ok());
    for (GpuBuffer* b : {&x_, &x_moved_, &projected_, &residual_, &normed_, &out_}) {
      EXPECT_TRUE(ops->Memset(b->get(), 0xff, b->bytes()).ok());
    }
    EXPECT_TRUE(ops->Synchronize().ok());
  }
  ~Step() { ops_->FreeHost(staging_); }

  // The calls a graph records: no allocation, no synchronization.
  absl::Status Calls() {
    BATON_RETURN_IF_ERROR(ops_->CopyToDevice(x_.get(), staging_, kFloats * 4));
    BATON_RETURN_IF_ERROR(ops_->CopyOnDevice(x_moved_.get(), x_.get(), kFloats * 4));
    BATON_RETURN_IF_ERROR(ops_->RmsNorm(x_moved_.as<float>(), norm_weight_.as<float>(), kRows, kN,
                                        1e-5f, normed_.as<Bf16Bits>()));
    BATON_RETURN_IF_ERROR(ops_->Memset(projected_.get(), 0, kFloats * 4));
    BATON_RETURN_IF_ERROR(ops_->Linear(normed_.as<Bf16Bits>(), weight_.as<Bf16Bits>(),
                                       bias_.as<float>(), kRows, kN, kN, projected_.as<float>()));
    return ops_->AddRmsNorm(residual_.as<float>(), projected_.as<float>(), norm_weight_.as<float>(),
                            kRows, kN, 1e-5f, out_.as<Bf16Bits>());
  }

  // Puts `input` where the step reads it and resets the residual (outside any capture).
  absl::Status Prepare(const std::vector<float>& input) {
    std::copy(input.begin(), input.end(), staging_);
    return ops_->CopyToDevice(residual_.get(), residual_start_.data(), kFloats * 4);
  }

  StepResult Read() {
    StepResult r;
    r.normed = Get<Bf16Bits>(normed_, kFloats);
    r.out = Get<Bf16Bits>(out_, kFloats);
    r.projected = Get<float>(projected_, kFloats);
    r.residual = Get<float>(residual_, kFloats);
    return r;
  }

 private:
  GpuBuffer Alloc(int64_t bytes) {
    auto b = GpuBuffer::Allocate(ops_, bytes);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? std::move(*b) : GpuBuffer();
  }
  template <typename T>
  std::vector<T> Get(const GpuBuffer& b, int64_t n) {
    std::vector<T> v(static_cast<size_t>(n));
    const absl::Status s = ops_->CopyToHost(v.data(), b.get(), n * static_cast<int64_t>(sizeof(T)));
    EXPECT_TRUE(s.ok()) << s;
    return v;
  }

  GpuOps* ops_;
  float* staging_ = nullptr;
  GpuBuffer x_, x_moved_, normed_, projected_, residual_, out_, norm_weight_, weight_, bias_;
  std::vector<float> residual_start_;
};

void ExpectSameStep(const StepResult& a, const StepResult& b, const std::string& what) {
  ExpectSameBits(a.normed, b.normed, what + " normed");
  ExpectSameBits(a.projected, b.projected, what + " projected");
  ExpectSameBits(a.residual, b.residual, what + " residual");
  ExpectSameBits(a.out, b.out, what + " out");
}

// Captures the step on `ops`, checks that capturing ran nothing, then replays it on two
// inputs: each replay must read the memory as it is then, giving the bits a direct run
// gives on that input.
void CheckGraphReplay(GpuOps* ops) {
  SCOPED_TRACE(ops->name());
  std::mt19937 rng(31);
  Step step(ops, rng);
  const std::vector<float> inputs[2] = {RandomFloats(Step::kFloats, rng),
                                        RandomFloats(Step::kFloats, rng, -4, 4)};
  CONTRACT_ASSERT_OK(step.Prepare(inputs[0]));
  CONTRACT_ASSERT_OK(ops->Synchronize());
  CONTRACT_ASSERT_OK(ops->BeginCapture());
  CONTRACT_ASSERT_OK(step.Calls());
  auto graph = ops->EndCapture();
  ASSERT_TRUE(graph.ok()) << graph.status();
  // Recorded, not run: every output still holds its 0xff bytes.
  const StepResult untouched = step.Read();
  for (const Bf16Bits b : untouched.out) ASSERT_EQ(b, 0xffff);
  for (const float f : untouched.projected) ASSERT_TRUE(std::isnan(f));

  StepResult replayed[2], direct[2];
  for (int round = 0; round < 2; ++round) {
    CONTRACT_ASSERT_OK(step.Prepare(inputs[round]));
    CONTRACT_ASSERT_OK(ops->Launch(**graph));
    replayed[round] = step.Read();  // CopyToHost waits for the replay
    CONTRACT_ASSERT_OK(step.Prepare(inputs[round]));
    CONTRACT_ASSERT_OK(step.Calls());
    direct[round] = step.Read();
    ExpectSameStep(replayed[round], direct[round], "round " + std::to_string(round));
  }
  // The second replay read the second input, not what the first one saw.
  EXPECT_NE(replayed[0].projected, replayed[1].projected);
  // A replay twice in a row, then a read: the residual got the projection twice.
  CONTRACT_ASSERT_OK(step.Prepare(inputs[1]));
  CONTRACT_ASSERT_OK(ops->Launch(**graph));
  CONTRACT_ASSERT_OK(ops->Launch(**graph));
  const StepResult twice = step.Read();
  ExpectSameBits(twice.projected, direct[1].projected, "two replays: projected");
  std::vector<float> want(direct[1].residual);
  for (size_t i = 0; i < want.size(); ++i) want[i] += direct[1].projected[i];
  ExpectSameBits(twice.residual, want, "two replays: residual");
}

TEST_F(GpuOpsContractTest, GraphReplayReadsTheMemoryAsItIsAtReplay) {
  CheckGraphReplay(cuda_.get());
  CheckGraphReplay(&host_);  // the emulation keeps the same promise
}

TEST_F(GpuOpsContractTest, ACallThatFailsWhileCapturingEndsTheCapture) {
  const auto capturing = [&] {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    EXPECT_EQ(cudaStreamIsCapturing(cuda_->stream(), &status), cudaSuccess);
    return status != cudaStreamCaptureStatusNone;
  };
  GpuBuffer f = Alloc(cuda_.get(), 64 * sizeof(float));
  CONTRACT_ASSERT_OK(cuda_->Memset(f.get(), 0, 64 * sizeof(float)));

  // Memory calls a graph cannot hold.
  CONTRACT_ASSERT_OK(cuda_->BeginCapture());
  EXPECT_TRUE(capturing());
  EXPECT_EQ(cuda_->Malloc(256).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(capturing());
  EXPECT_EQ(cuda_->EndCapture().status().code(), absl::StatusCode::kFailedPrecondition);
  CONTRACT_ASSERT_OK(cuda_->BeginCapture());
  EXPECT_EQ(cuda_->FreeMemoryBytes().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(capturing());

  // A kernel call with a shape its kernel refuses (a group of 17), after a good one.
  CONTRACT_ASSERT_OK(cuda_->BeginCapture());
  CONTRACT_ASSERT_OK(cuda_->Add(f.as<float>(), f.as<float>(), 64));
  GpuKvLayer kv;
  kv.base = f.get();
  kv.block_size = 16;
  kv.head_dim = 64;
  kv.rows = 16 * 64;
  kv.head_stride = 2 * kv.rows;
  kv.page_stride = kv.head_stride;
  EXPECT_EQ(cuda_
                ->DecodeAttention(f.as<float>(), 64, nullptr, kv, nullptr, 4, nullptr, 1, 17, 1, 64,
                                  1.0f, f.get(), f.as<float>())
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(capturing());

  // Synchronize cannot be captured either; a Free waits for the capture's end.
  GpuBuffer doomed = Alloc(cuda_.get(), 256);
  CONTRACT_ASSERT_OK(cuda_->BeginCapture());
  doomed = GpuBuffer();  // Free while capturing: deferred, the capture goes on
  EXPECT_TRUE(capturing());
  EXPECT_EQ(cuda_->Synchronize().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(capturing());

  // A graph another implementation captured is refused.
  CONTRACT_ASSERT_OK(host_.BeginCapture());
  auto host_graph = host_.EndCapture();
  ASSERT_TRUE(host_graph.ok());
  EXPECT_EQ(cuda_->Launch(**host_graph).code(), absl::StatusCode::kInvalidArgument);

  // The stream works as before: nothing captured ran, and a direct call does.
  const std::vector<float> ones(64, 1.0f);
  CONTRACT_ASSERT_OK(cuda_->CopyToDevice(f.get(), ones.data(), 64 * sizeof(float)));
  CONTRACT_ASSERT_OK(cuda_->Add(f.as<float>(), f.as<float>(), 64));
  std::vector<float> back(64);
  CONTRACT_ASSERT_OK(cuda_->CopyToHost(back.data(), f.get(), 64 * sizeof(float)));
  for (const float v : back) ASSERT_EQ(v, 2.0f);
}

}  // namespace
}  // namespace baton::kernels::cuda
