#include "tests/fakes/host_gpu_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/cpu/bf16.h"

namespace baton::fakes {
namespace {

using kernels::Bf16Bits;

class HostGraph : public kernels::GpuGraph {
 public:
  std::vector<std::function<absl::Status()>> ops;
};

// CUDA's conversions, bit for bit (its canonical NaN included): kernels/cpu/bf16.h.
float Bf16(Bf16Bits b) { return cpu::Bf16ToFloat(cpu::Bf16{b}); }
Bf16Bits ToBf16Bits(float f) { return cpu::FloatToBf16(f).bits; }

// The element at `index` of pages of either type, as f32.
float KvAt(const kernels::GpuKvLayer& kv, int64_t index) {
  return kv.bf16 ? Bf16(static_cast<const Bf16Bits*>(kv.base)[index])
                 : static_cast<const float*>(kv.base)[index];
}

int64_t KvIndex(const kernels::GpuKvLayer& kv, int64_t page, int64_t head, int64_t half,
                int64_t pos, int64_t d) {
  return page * kv.page_stride + head * kv.head_stride + half * kv.rows + pos * kv.head_dim + d;
}

// Softmax-weighted sum of V over positions [0, len) for one query head, in double.
void Attend(const float* q, const kernels::GpuKvLayer& kv, const int32_t* table, int64_t kv_head,
            int64_t len, float scale, float* out) {
  const int64_t hd = kv.head_dim;
  std::vector<double> scores(len);
  double max_score = -std::numeric_limits<double>::infinity();
  for (int64_t p = 0; p < len; ++p) {
    const int64_t page = table[p / kv.block_size], row = p % kv.block_size;
    double dot = 0;
    for (int64_t d = 0; d < hd; ++d)
      dot += double{q[d]} * KvAt(kv, KvIndex(kv, page, kv_head, 0, row, d));
    scores[p] = dot * scale;
    max_score = std::max(max_score, scores[p]);
  }
  double total = 0;
  for (double& s : scores) total += (s = std::exp(s - max_score));
  for (int64_t d = 0; d < hd; ++d) {
    double acc = 0;
    for (int64_t p = 0; p < len; ++p) {
      const int64_t page = table[p / kv.block_size], row = p % kv.block_size;
      acc += scores[p] * KvAt(kv, KvIndex(kv, page, kv_head, 1, row, d));
    }
    out[d] = static_cast<float>(acc / total);
  }
}

void NormRow(const float* x, const float* w, int n, float eps, Bf16Bits* out) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += double{x[i]} * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
  for (int i = 0; i < n; ++i) out[i] = ToBf16Bits(x[i] * scale * w[i]);
}

}  // namespace

HostGpuOps::~HostGpuOps() {
  for (auto& [p, bytes] : device_) std::free(reinterpret_cast<void*>(p));  // NOLINT: our map's keys
}

absl::StatusOr<void*> HostGpuOps::Malloc(int64_t bytes) {
  if (capturing_) return absl::FailedPreconditionError("Malloc while capturing a graph");
  if (bytes <= 0) return absl::InvalidArgumentError(absl::StrCat("Malloc of ", bytes, " bytes"));
  if (in_use_ + bytes > memory_bytes_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes: ", memory_bytes_ - in_use_, " are free"));
  }
  const int64_t rounded = (bytes + 255) / 256 * 256;
  void* p = std::aligned_alloc(256, static_cast<size_t>(rounded));
  if (p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes"));
  }
  std::memset(p, 0xff, static_cast<size_t>(rounded));  // NaN: device memory is not zeroed
  device_[reinterpret_cast<uintptr_t>(p)] = bytes;
  in_use_ += bytes;
  return p;
}

void HostGpuOps::Free(void* device) {
  auto it = device_.find(reinterpret_cast<uintptr_t>(device));
  if (it == device_.end()) return;
  in_use_ -= it->second;
  device_.erase(it);
  std::free(device);
}

absl::StatusOr<void*> HostGpuOps::MallocHost(int64_t bytes) {
  if (bytes <= 0) return absl::InvalidArgumentError(absl::StrCat("MallocHost of ", bytes));
  void* p = std::aligned_alloc(256, static_cast<size_t>((bytes + 255) / 256 * 256));
  if (p == nullptr) return absl::ResourceExhaustedError("MallocHost");
  return p;
}

void HostGpuOps::FreeHost(void* host) { std::free(host); }

absl::Status HostGpuOps::CheckDevice(const void* p, int64_t bytes, const char* what) const {
  if (bytes <= 0) return absl::OkStatus();
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = device_.upper_bound(a);
  if (it != device_.begin()) {
    --it;
    if (a >= it->first && a + static_cast<uintptr_t>(bytes) <= it->first + it->second) {
      return absl::OkStatus();
    }
  }
  return absl::OutOfRangeError(
      absl::StrCat(what, ": ", bytes, " bytes at ", a, " are not in one device allocation"));
}

absl::Status HostGpuOps::Enqueue(Op op) {
  if (capturing_) {
    captured_.push_back(std::move(op));
    return absl::OkStatus();
  }
  ++calls_;
  return op();
}

absl::Status HostGpuOps::CopyToDevice(void* device, const void* host, int64_t bytes) {
  BATON_RETURN_IF_ERROR(CheckDevice(device, bytes, "CopyToDevice"));
  return Enqueue([=] {
    std::memcpy(device, host, static_cast<size_t>(bytes));
    return absl::OkStatus();
  });
}

absl::Status HostGpuOps::CopyOnDevice(void* dst, const void* src, int64_t bytes) {
  BATON_RETURN_IF_ERROR(CheckDevice(dst, bytes, "CopyOnDevice to"));
  BATON_RETURN_IF_ERROR(CheckDevice(src, bytes, "CopyOnDevice from"));
  return Enqueue([=] {
    std::memmove(dst, src, static_cast<size_t>(bytes));
    return absl::OkStatus();
  });
}

absl::Status HostGpuOps::CopyToHost(void* host, const void* device, int64_t bytes) {
  if (capturing_) return absl::FailedPreconditionError("CopyToHost while capturing a graph");
  BATON_RETURN_IF_ERROR(CheckDevice(device, bytes, "CopyToHost"));
  std::memcpy(host, device, static_cast<size_t>(bytes));
  return absl::OkStatus();
}

absl::Status HostGpuOps::Memset(void* device, int value, int64_t bytes) {
  BATON_RETURN_IF_ERROR(CheckDevice(device, bytes, "Memset"));
  return Enqueue([=] {
    std::memset(device, value, static_cast<size_t>(bytes));
    return absl::OkStatus();
  });
}

absl::Status HostGpuOps::Synchronize() {
  if (capturing_) return absl::FailedPreconditionError("Synchronize while capturing a graph");
  return absl::OkStatus();
}

absl::Status HostGpuOps::Embed(const Bf16Bits* table, int64_t rows, int64_t first_row, int dim,
                               const int32_t* ids, int tokens, float* out) {
  BATON_RETURN_IF_ERROR(CheckDevice(table, rows * dim * 2, "Embed table"));
  BATON_RETURN_IF_ERROR(CheckDevice(ids, int64_t{tokens} * 4, "Embed ids"));
  BATON_RETURN_IF_ERROR(CheckDevice(out, int64_t{tokens} * dim * 4, "Embed out"));
  return Enqueue([=] {
    for (int t = 0; t < tokens; ++t) {
      const int64_t local = ids[t] - first_row;
      for (int i = 0; i < dim; ++i) {
        out[int64_t{t} * dim + i] =
            local >= 0 && local < rows ? Bf16(table[local * dim + i]) : 0.0f;
      }
    }
    return absl::OkStatus();
  });
}

absl::Status HostGpuOps::RmsNorm(const float* x, const float* weight, int rows, int n, float eps,
                                 Bf16Bits* out) {
  BATON_RETURN_IF_ERROR(CheckDevice(x, int64_t{rows} * n * 4, "RmsNorm x"));
  BATON_RETURN_IF_ERROR(CheckDevice(weight, int64_t{n} * 4, "RmsNorm weight"));
  BATON_RETURN_IF_ERROR(CheckDevice(out, int64_t{rows} * n * 2, "RmsNorm out"));
  return Enqueue([=] {
    for (int r = 0; r < rows; ++r)
      NormRow(x + int64_t{r} * n, weight, n, eps, out + int64_t{r} * n);
    return absl::OkStatus();
  });
}

absl::Status HostGpuOps::AddRmsNorm(float* residual, const float* x, const float* weight, int rows,
                                    int n, float eps, Bf16Bits* out) {
  BATON_RETURN_IF_ERROR(CheckDevice(residual, int64_t{rows} * n * 4, "AddRmsNorm residual"));
  BATON_RETURN_IF_ERROR(CheckDevice(x, int64_t{rows} * n * 4, "AddRmsNorm x"));
  BATON_RETURN_IF_ERROR(CheckDevice(weight, int64_t{n} * 4, "AddRmsNorm weight"));
  BATON_RETURN_IF_ERROR(CheckDevice(out, int64_t{rows} * n * 2, "AddRmsNorm out"));
  return Enqueue([=] {
    for (int64_t i = 0; i < int64_t{rows} * n; ++i) residual[i] += x[i];
    for (int r = 0; r < rows; ++r) {
      NormRow(residual + int64_t{r} * n, weight, n, eps, out + int64_t{r} * n);
    }
    return absl::OkStatus();
  });
}

absl::Status HostGpuOps::GatherRows(const float* x, int n, const int32_t* rows, int count,
                                    float* out) {
  BATON_RETURN_IF_ERROR(CheckDevice(rows, int64_t{count} * 4, "GatherRows rows"));
  BATON_RETURN_IF_ERROR(CheckDevice(out, int64_t{count} * n * 4, "GatherRows out"));
  return Enqueue([=, this]() -> absl::Status {
    for (int i = 0; i < count; ++i) {
      BATON_RETURN_IF_ERROR(CheckDevice(x + int64_t{rows[i]} * n, int64_t{n} * 4, "GatherRows x"));
      std::memcpy(out + int64_t{i} * n, x + int64_t{rows[i]} * n, sizeof(float) * n);
    }
    return absl::OkStatus();
  });
}

absl::Status HostGpuOps::Add(float* residual, const float* x, int64_t n) {
  BATON_RETURN_IF_ERROR(CheckDevice(residual, n * 4, "Add residual"));
  BATON_RETURN_IF_ERROR(CheckDevice(x, n * 4, "Add x"));
  return Enqueue([=] {
    for (int64_t i = 0; i < n; ++i) residual[i] += x[i];
    return absl::OkStatus();
  });
}

absl::Status HostGpuOps::Linear(const Bf16Bits* x, const Bf16Bits* w, const float* bias, int m,
                                int n, int k, float* out) {
  if (m < 1 || n < 1 || k < 1) {
    return absl::InvalidArgumentError(absl::StrCat("Linear m=", m, " n=", n, " k=", k));
  }
  for (const void* p :
       {static_cast<const void*>(x), static_cast<const void*>(w), static_cast<const void*>(out)}) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
      return absl::InvalidArgumentError("Linear operands must be 16-byte aligned");
    }
  }
  BATON_RETURN_IF_ERROR(CheckDevice(x, int64_t{m} * k * 2, "Linear x"));
  BATON_RETURN_IF_ERROR(CheckDevice(w, int64_t{n} * k * 2, "Linear w"));
  if (bias != nullptr) BATON_RETURN_IF_ERROR(CheckDevice(bias, int64_t{n} * 4, "Linear bias"));
  BATON_RETURN_IF_ERROR(CheckDevice(out, int64_t{m} * n * 4, "Linear out"));
  return Enqueue([=] {
    std::vector<float> xf(k), wf(k);
    for (int i = 0; i < m; ++i) {
      for (int c = 0; c < k; ++c) xf[c] = Bf16(x[int64_t{i} * k + c]);
      for (int j = 0; j < n; ++j) {
        double acc = 0;
        const Bf16Bits* row = w + int64_t{j} * k;
        for (int c = 0; c < k; ++c) acc += double{xf[c]} * Bf16(row[c]);
        float y = static_cast<float>(acc);
        if (bias != nullptr) y += bias[j];
        out[int64_t{i} * n + j] = y;
      }
    }
    return absl::OkStatus();
  });
}

absl::Status HostGpuOps::RopeQk(float* qkv, int tokens, int64_t row_stride, int q_heads,
                                int kv_heads, int head_dim, const int32_t* positions,
                                const float* cos_table, const float* sin_table, bool interleaved) {
  if (head_dim < 2 || head_dim % 2 != 0) return absl::InvalidArgumentError("RopeQk head_dim");
  if (tokens <= 0) return absl::OkStatus();
  BATON_RETURN_IF_ERROR(CheckDevice(
      qkv, ((tokens - 1) * row_stride + int64_t{q_heads + kv_heads} * head_dim) * 4, "RopeQk qkv"));
  BATON_RETURN_IF_ERROR(CheckDevice(positions, int64_t{tokens} * 4, "RopeQk positions"));
  return Enqueue([=, this]() -> absl::Status {
    const int half = head_dim / 2;
    for (int t = 0; t < tokens; ++t) {
      const int64_t pos = positions[t];
      BATON_RETURN_IF_ERROR(CheckDevice(cos_table + pos * half, int64_t{half} * 4, "RopeQk cos"));
      BATON_RETURN_IF_ERROR(CheckDevice(sin_table + pos * half, int64_t{half} * 4, "RopeQk sin"));
      for (int h = 0; h < q_heads + kv_heads; ++h) {
        float* v = qkv + t * row_stride + int64_t{h} * head_dim;
        for (int i = 0; i < half; ++i) {
          const int ia = interleaved ? 2 * i : i, ib = interleaved ? 2 * i + 1 : i + half;
          const float c = cos_table[pos * half + i], s = sin_table[pos * half + i];
          const float a = v[ia], b = v[ib];
          v[ia] = a * c - b * s;
          v[ib] = b * c + a * s;
        }
      }
    }
    return absl::OkStatus();
  });
}

absl::Status HostGpuOps::WriteKv(const kernels::GpuKvLayer& kv, int kv_heads, const float* k,
                                 const float* v, int64_t row_stride, const int32_t* slot_pages,
                                 const int32_t* slot_rows, int tokens) {
  if (tokens <= 0) return absl::OkStatus();
  const int64_t row_bytes = ((tokens - 1) * row_stride + int64_t{kv_heads} * kv.head_dim) * 4;
  BATON_RETURN_IF_ERROR(CheckDevice(k, row_bytes, "WriteKv k"));
  BATON_RETURN_IF_ERROR(CheckDevice(v, row_bytes, "WriteKv v"));
  BATON_RETURN_IF_ERROR(CheckDevice(slot_pages, int64_t{tokens} * 4, "WriteKv slot_pages"));
  BATON_RETURN_IF_ERROR(CheckDevice(slot_rows, int64_t{tokens} * 4, "WriteKv slot_rows"));
  return Enqueue([=, this]() -> absl::Status {
    const int64_t elem = kv.bf16 ? 2 : 4;
    for (int t = 0; t < tokens; ++t) {
      const int64_t page = slot_pages[t], row = slot_rows[t];
      if (page < 0 || row < 0) continue;
      if (row >= kv.block_size) return absl::OutOfRangeError("WriteKv row past the page");
      for (int h = 0; h < kv_heads; ++h) {
        for (int half = 0; half < 2; ++half) {
          const float* src = (half == 0 ? k : v) + t * row_stride + int64_t{h} * kv.head_dim;
          const int64_t at = KvIndex(kv, page, h, half, row, 0);
          BATON_RETURN_IF_ERROR(CheckDevice(static_cast<char*>(kv.base) + at * elem,
                                            kv.head_dim * elem, "WriteKv page"));
          for (int d = 0; d < kv.head_dim; ++d) {
            if (kv.bf16) {
              static_cast<Bf16Bits*>(kv.base)[at + d] = ToBf16Bits(src[d]);
            } else {
              static_cast<float*>(kv.base)[at + d] = src[d];
            }
          }
        }
      }
    }
    return absl::OkStatus();
  });
}

int64_t HostGpuOps::DecodeWorkspaceBytes(int num_seqs, int q_heads, int head_dim,
                                         int max_context) const {
  // The CUDA kernel's partial sums: what the forward must plan for.
  const int64_t splits = (max_context + 255) / 256;
  return int64_t{num_seqs} * q_heads * splits * (head_dim + 2) * 4;
}

absl::Status HostGpuOps::CheckAttention(const char* what, const kernels::GpuKvLayer& kv,
                                        const int32_t* block_tables, int max_blocks, int num_seqs,
                                        int kv_heads) const {
  BATON_RETURN_IF_ERROR(
      CheckDevice(block_tables, int64_t{num_seqs} * max_blocks * 4, "attention block_tables"));
  if (kv.head_dim < 1 || kv.block_size < 1 || kv_heads < 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": bad KV shape"));
  }
  return absl::OkStatus();
}

absl::Status HostGpuOps::DecodeAttention(const float* q, int64_t q_stride, const int32_t* q_rows,
                                         const kernels::GpuKvLayer& kv, const int32_t* block_tables,
                                         int max_blocks, const int32_t* context_lens, int num_seqs,
                                         int q_heads, int kv_heads, int max_context, float scale,
                                         void* workspace, float* out) {
  if (num_seqs <= 0) return absl::OkStatus();
  if (q_heads % kv_heads != 0 || q_heads / kv_heads > 16 || kv.head_dim % 8 != 0 ||
      int64_t{max_blocks} * kv.block_size < max_context) {
    return absl::InvalidArgumentError("DecodeAttention: a shape the kernel does not take");
  }
  BATON_RETURN_IF_ERROR(
      CheckAttention("DecodeAttention", kv, block_tables, max_blocks, num_seqs, kv_heads));
  BATON_RETURN_IF_ERROR(CheckDevice(q_rows, int64_t{num_seqs} * 4, "DecodeAttention q_rows"));
  BATON_RETURN_IF_ERROR(
      CheckDevice(context_lens, int64_t{num_seqs} * 4, "DecodeAttention context_lens"));
  BATON_RETURN_IF_ERROR(CheckDevice(
      workspace, DecodeWorkspaceBytes(num_seqs, q_heads, kv.head_dim, max_context), "workspace"));
  return Enqueue([=, this]() -> absl::Status {
    const int64_t width = int64_t{q_heads} * kv.head_dim;
    const int group = q_heads / kv_heads;
    for (int s = 0; s < num_seqs; ++s) {
      const int64_t len = std::min(context_lens[s], max_context);
      float* o = out + int64_t{q_rows[s]} * width;
      BATON_RETURN_IF_ERROR(CheckDevice(o, width * 4, "DecodeAttention out"));
      BATON_RETURN_IF_ERROR(CheckDevice(q + q_rows[s] * q_stride, width * 4, "DecodeAttention q"));
      if (len <= 0) {
        std::fill_n(o, width, 0.0f);
        continue;
      }
      const int32_t* table = block_tables + int64_t{s} * max_blocks;
      for (int64_t b = 0; b < (len + kv.block_size - 1) / kv.block_size; ++b) {
        const int64_t elem = kv.bf16 ? 2 : 4;
        BATON_RETURN_IF_ERROR(
            CheckDevice(static_cast<const char*>(kv.base) + table[b] * kv.page_stride * elem,
                        kv.head_stride * kv_heads * elem, "DecodeAttention page"));
      }
      for (int h = 0; h < q_heads; ++h) {
        Attend(q + q_rows[s] * q_stride + int64_t{h} * kv.head_dim, kv, table, h / group, len,
               scale, o + int64_t{h} * kv.head_dim);
      }
    }
    return absl::OkStatus();
  });
}

absl::Status HostGpuOps::PrefillAttention(const float* q, int64_t q_stride,
                                          const kernels::GpuKvLayer& kv,
                                          const int32_t* block_tables, int max_blocks,
                                          const int32_t* query_starts, const int32_t* query_lens,
                                          const int32_t* context_lens, int num_seqs,
                                          int max_query_len, int q_heads, int kv_heads, float scale,
                                          float* out) {
  if (num_seqs <= 0) return absl::OkStatus();
  if (q_heads % kv_heads != 0 || kv.head_dim % 8 != 0) {
    return absl::InvalidArgumentError("PrefillAttention: a shape the kernel does not take");
  }
  BATON_RETURN_IF_ERROR(
      CheckAttention("PrefillAttention", kv, block_tables, max_blocks, num_seqs, kv_heads));
  for (const int32_t* p : {query_starts, query_lens, context_lens}) {
    BATON_RETURN_IF_ERROR(CheckDevice(p, int64_t{num_seqs} * 4, "PrefillAttention lists"));
  }
  return Enqueue([=, this]() -> absl::Status {
    const int64_t width = int64_t{q_heads} * kv.head_dim;
    const int group = q_heads / kv_heads;
    for (int s = 0; s < num_seqs; ++s) {
      const int64_t qlen = query_lens[s], ctx = context_lens[s];
      if (qlen > max_query_len || qlen > ctx || ctx > int64_t{max_blocks} * kv.block_size) {
        return absl::OutOfRangeError(absl::StrCat("PrefillAttention: sequence ", s, " has ", qlen,
                                                  " queries over ", ctx, " positions"));
      }
      const int32_t* table = block_tables + int64_t{s} * max_blocks;
      for (int64_t i = 0; i < qlen; ++i) {
        const int64_t row = query_starts[s] + i;
        BATON_RETURN_IF_ERROR(CheckDevice(out + row * width, width * 4, "PrefillAttention out"));
        BATON_RETURN_IF_ERROR(CheckDevice(q + row * q_stride, width * 4, "PrefillAttention q"));
        const int64_t len = ctx - qlen + i + 1;
        for (int h = 0; h < q_heads; ++h) {
          Attend(q + row * q_stride + int64_t{h} * kv.head_dim, kv, table, h / group, len, scale,
                 out + row * width + int64_t{h} * kv.head_dim);
        }
      }
    }
    return absl::OkStatus();
  });
}

absl::Status HostGpuOps::SwiGlu(const float* gate_up, int rows, int inter, Bf16Bits* out) {
  BATON_RETURN_IF_ERROR(CheckDevice(gate_up, int64_t{rows} * inter * 8, "SwiGlu gate_up"));
  BATON_RETURN_IF_ERROR(CheckDevice(out, int64_t{rows} * inter * 2, "SwiGlu out"));
  return Enqueue([=] {
    for (int r = 0; r < rows; ++r) {
      const float* g = gate_up + int64_t{r} * 2 * inter;
      for (int i = 0; i < inter; ++i) {
        out[int64_t{r} * inter + i] = ToBf16Bits(g[i] / (1.0f + std::exp(-g[i])) * g[inter + i]);
      }
    }
    return absl::OkStatus();
  });
}

absl::Status HostGpuOps::ToBf16(const float* x, int64_t n, Bf16Bits* out) {
  BATON_RETURN_IF_ERROR(CheckDevice(x, n * 4, "ToBf16 x"));
  BATON_RETURN_IF_ERROR(CheckDevice(out, n * 2, "ToBf16 out"));
  return Enqueue([=] {
    for (int64_t i = 0; i < n; ++i) out[i] = ToBf16Bits(x[i]);
    return absl::OkStatus();
  });
}

absl::Status HostGpuOps::ArgMax(const float* logits, int64_t vocab, int rows, int32_t* ids) {
  BATON_RETURN_IF_ERROR(CheckDevice(logits, vocab * rows * 4, "ArgMax logits"));
  BATON_RETURN_IF_ERROR(CheckDevice(ids, int64_t{rows} * 4, "ArgMax ids"));
  return Enqueue([=] {
    for (int r = 0; r < rows; ++r) {
      const float* row = logits + r * vocab;
      int64_t best = vocab;
      for (int64_t i = 0; i < vocab; ++i) {
        if (!std::isnan(row[i]) && (best == vocab || row[i] > row[best])) best = i;
      }
      ids[r] = static_cast<int32_t>(best);
    }
    return absl::OkStatus();
  });
}

absl::Status HostGpuOps::BeginCapture() {
  if (capturing_) return absl::FailedPreconditionError("BeginCapture while capturing");
  capturing_ = true;
  captured_.clear();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<kernels::GpuGraph>> HostGpuOps::EndCapture() {
  if (!capturing_) return absl::FailedPreconditionError("EndCapture without BeginCapture");
  capturing_ = false;
  auto graph = std::make_unique<HostGraph>();
  graph->ops = std::move(captured_);
  captured_.clear();
  return graph;
}

absl::Status HostGpuOps::Launch(const kernels::GpuGraph& graph) {
  if (capturing_) return absl::FailedPreconditionError("Launch while capturing");
  ++launches_;
  for (const auto& op : static_cast<const HostGraph&>(graph).ops) {
    ++calls_;
    BATON_RETURN_IF_ERROR(op());
  }
  return absl::OkStatus();
}

}  // namespace baton::fakes
