#include "model/arch/llama.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/check.h"
#include "common/status.h"
#include "common/strings.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"
#include "model/rope_frequencies.h"

namespace baton::model {
namespace {

void Grow(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(n);
}

// Tokens per task of the per-token loops outside the matmuls (RoPE, KV stores, residual
// adds): a few microseconds of work each, so that a decode step runs them inline.
constexpr int64_t kTokensPerTask = 16;

const float* Bias(const Linear& lin) { return lin.bias.empty() ? nullptr : lin.bias.data(); }

// One new K or V row of n values into its page, in the pages' element type: bf16 pages
// round each value to nearest even (kernels/cpu/bf16.h), as a GPU worker does.
void StoreKvRow(const float* x, int64_t n, cpu::KvDtype dtype, std::byte* to) {
  switch (dtype) {
    case cpu::KvDtype::kF32:
      std::memcpy(to, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case cpu::KvDtype::kBf16:
      cpu::FloatToBf16Row(x, n, reinterpret_cast<cpu::Bf16*>(to));
      return;
  }
}

}  // namespace

LlamaForward::LlamaForward(const Model& model, const Shard& shard, ThreadPool* threads,
                           parallel::Communicator* tp)
    : model_(model), config_(model.config()), shard_(shard), threads_(threads), tp_(tp) {
  BATON_CHECK(shard.at.tp_size == 1 ||
              (tp != nullptr && tp->size() == shard.at.tp_size && tp->rank() == shard.at.tp_rank));
  inv_freq_ = RopeInverseFrequencies(config_, model.weights().rope_freq_factors);
}

absl::Status LlamaForward::Validate(std::span<const SequenceInput> batch, int64_t num_pages,
                                    int64_t block_size) const {
  return ValidateBatch(config_, batch, num_pages, block_size);
}

void LlamaForward::Rope(int64_t num_tokens) {
  const int64_t half = config_.head_dim / 2;
  Grow(cos_, num_tokens * half);
  Grow(sin_, num_tokens * half);
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(positions_[t]) * inv_freq_[i];
      cos_[t * half + i] = static_cast<float>(std::cos(angle));
      sin_[t * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void LlamaForward::Attention(int64_t layer, const KvPages& kv) {
  const int64_t heads = shard_.num_heads;
  const int64_t kv_heads = shard_.num_kv_heads;
  const int64_t head_dim = config_.head_dim;
  const int64_t group = heads / kv_heads;  // this rank's query heads per KV head it holds
  const int64_t q_width = heads * head_dim;
  const int64_t kv_width = kv_heads * head_dim;
  const int64_t block_size = kv.block_size;
  const bool interleaved = config_.rope_layout == RopeLayout::kInterleaved;
  const int64_t half = head_dim / 2;
  const int64_t num_tokens = static_cast<int64_t>(positions_.size());
  std::byte* layer_k = kv.k(layer - shard_.layer_begin);
  std::byte* layer_v = kv.v(layer - shard_.layer_begin);
  const int64_t elem = kv.element_bytes();

  // RoPE on q and k, then k/v into their pages, tokens spread over the threads (each
  // writes its own KV slots); run alone, this was about 2 % of a 512-token prefill.
  threads_->ParallelFor(num_tokens, kTokensPerTask, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      cpu::ApplyRope(q_.data() + t * q_width, heads, head_dim, cos_.data() + t * half,
                     sin_.data() + t * half, interleaved);
      cpu::ApplyRope(k_.data() + t * kv_width, kv_heads, head_dim, cos_.data() + t * half,
                     sin_.data() + t * half, interleaved);
      const int64_t pos = positions_[t];
      const int32_t block = token_seq_[t]->block_table[pos / block_size];
      const int64_t offset = block * kv.page_elements + (pos % block_size) * head_dim;
      for (int64_t h = 0; h < kv_heads; ++h) {
        const int64_t from = t * kv_width + h * head_dim;
        const int64_t to = (offset + h * kv.head_stride) * elem;
        StoreKvRow(k_.data() + from, head_dim, kv.dtype, layer_k + to);
        StoreKvRow(v_.data() + from, head_dim, kv.dtype, layer_v + to);
      }
    }
  });

  const cpu::PagedKvView view{.k = layer_k,
                              .v = layer_v,
                              .dtype = kv.dtype,
                              .block_stride = kv.page_elements,
                              .block_size = block_size,
                              .head_stride = kv.head_stride,
                              .head_dim = head_dim};
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  int64_t max_pos = 0;
  for (int64_t p : positions_) max_pos = std::max(max_pos, p);
  // Items are (token, query head), each costing about its number of keys. The threads get
  // contiguous runs of equal cost rather than of equal count: in a prefill chunk the last
  // queries see the most keys, and an equal count gave one thread three times the work.
  // A run is cut where the token or the KV head changes, and each piece goes through
  // AttendQueries at once, which reads its K and V once. No cut changes any query's result.
  const int64_t items = num_tokens * heads;
  const int64_t parts = std::min<int64_t>(threads_->num_threads(), items);
  attn_cuts_.assign(parts + 1, items);
  {
    constexpr int64_t kFixedCost = 32;  // per query, in keys: the passes' setup and tails
    auto cost = [&](int64_t item) { return positions_[item / heads] + 1 + kFixedCost; };
    int64_t total = 0;
    for (int64_t item = 0; item < items; ++item) total += cost(item);
    // Run p starts at the first item whose cost before it reaches p / parts of the total.
    int64_t before = 0;
    int64_t part = 0;
    for (int64_t item = 0; item < items && part < parts; before += cost(item), ++item) {
      while (part < parts && before * parts >= total * part) attn_cuts_[part++] = item;
    }
  }
  threads_->ParallelFor(parts, 1, [&](int64_t p0, int64_t p1) {
    std::vector<float> scores(group * (max_pos + 1));
    for (int64_t item = attn_cuts_[p0]; item < attn_cuts_[p1];) {
      const int64_t t = item / heads;
      const int64_t h = item % heads;
      const int64_t kv_head = h / group;
      const int64_t count = std::min(attn_cuts_[p1] - item, (kv_head + 1) * group - h);
      cpu::AttendQueries(q_.data() + t * q_width + h * head_dim, count, positions_[t], kv_head,
                         token_seq_[t]->block_table.data(), view, scale, scores.data(),
                         attn_.data() + t * q_width + h * head_dim);
      item += count;
    }
  });
}

absl::Status LlamaForward::SumOverTp(float* data, int64_t n) {
  if (shard_.at.tp_size == 1) return absl::OkStatus();
  return tp_->AllReduceSum(std::span<float>(data, static_cast<size_t>(n)));
}

absl::Status LlamaForward::Embed(std::span<const SequenceInput> batch, float* x) {
  const int64_t hidden = config_.hidden_size;
  const Weights& w = model_.weights();
  int64_t t = 0;
  for (const SequenceInput& seq : batch) {
    for (int32_t token : seq.tokens) {
      // Vocabulary-parallel: the rank whose rows hold the token writes it, the others
      // zeros, and the sum (exact: one term is non-zero) gives every rank the row.
      const int64_t local = token - shard_.vocab_begin;
      if (local >= 0 && local < shard_.vocab_size) {
        cpu::DequantizeRow(w.embedding, local, x + t * hidden);
      } else {
        std::fill_n(x + t * hidden, hidden, 0.0f);
      }
      ++t;
    }
  }
  return SumOverTp(x, t * hidden);
}

absl::Status LlamaForward::Logits(std::span<const SequenceInput> batch, const float* x,
                                  ForwardOutput* out) {
  const Weights& w = model_.weights();
  const int64_t hidden = config_.hidden_size;
  const int64_t vocab = config_.vocab_size;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  // Only the rows someone asked logits for go through the final norm and the LM head.
  out->vocab_size = vocab;
  const int64_t rows = PlanLogitRows(batch, &out->first_row);
  int64_t row = 0, t = 0;
  for (const SequenceInput& seq : batch) {
    const int64_t count = static_cast<int64_t>(seq.tokens.size());
    int64_t first = t + count;
    if (seq.logits == LogitsWanted::kAll) first = t;
    if (seq.logits == LogitsWanted::kLast) first = t + count - 1;
    for (int64_t r = first; r < t + count; ++r, ++row) {
      cpu::RmsNorm(x + r * hidden, w.final_norm.data(), hidden, eps, h_.data() + row * hidden);
    }
    t += count;
  }
  out->logits.resize(rows * vocab);
  if (rows == 0) return absl::OkStatus();
  if (shard_.at.tp_size == 1) {
    cpu::MatMul(h_.data(), rows, hidden, w.lm_head, nullptr, out->logits.data(), vocab, threads_);
    return absl::OkStatus();
  }
  // Each rank computes its slice of the vocabulary, padded to vocab_shard columns so that
  // every rank sends the same bytes; the gather lays them side by side per rank.
  const int64_t shard = shard_.vocab_shard;
  const int tp = shard_.at.tp_size;
  Grow(gathered_, rows * shard * (tp + 1));
  float* mine = gathered_.data() + rows * shard * tp;
  std::fill_n(mine, rows * shard, 0.0f);
  if (shard_.vocab_size > 0) {
    cpu::MatMul(h_.data(), rows, hidden, w.lm_head, nullptr, mine, shard, threads_);
  }
  BATON_RETURN_IF_ERROR(
      tp_->AllGather(std::as_bytes(std::span<const float>(mine, static_cast<size_t>(rows * shard))),
                     std::as_writable_bytes(std::span<float>(
                         gathered_.data(), static_cast<size_t>(rows * shard * tp)))));
  for (int r = 0; r < tp; ++r) {
    const int64_t begin = r * shard;
    const int64_t width = std::max<int64_t>(0, std::min(shard, vocab - begin));
    for (int64_t i = 0; i < rows; ++i) {
      std::memcpy(out->logits.data() + i * vocab + begin, gathered_.data() + (r * rows + i) * shard,
                  width * sizeof(float));
    }
  }
  return absl::OkStatus();
}

absl::Status LlamaForward::Forward(std::span<const SequenceInput> batch, const KvPages& kv,
                                   std::vector<float>* hidden_state, ForwardOutput* out) {
  const Weights& w = model_.weights();
  const int64_t hidden = config_.hidden_size;
  const int64_t q_width = shard_.num_heads * config_.head_dim;
  const int64_t kv_width = shard_.num_kv_heads * config_.head_dim;
  const int64_t inter = shard_.inter_size;
  const float eps = static_cast<float>(config_.rms_norm_eps);

  positions_.clear();
  token_seq_.clear();
  for (const SequenceInput& seq : batch) {
    for (size_t i = 0; i < seq.tokens.size(); ++i) {
      positions_.push_back(seq.start_pos + static_cast<int64_t>(i));
      token_seq_.push_back(&seq);
    }
  }
  const int64_t n = static_cast<int64_t>(positions_.size());
  Grow(*hidden_state, n * hidden);
  float* x = hidden_state->data();
  Grow(h_, n * hidden);
  Grow(q_, n * q_width);
  Grow(k_, n * kv_width);
  Grow(v_, n * kv_width);
  Grow(attn_, n * q_width);
  Grow(gate_, n * inter);
  Grow(up_, n * inter);

  if (shard_.first_stage()) BATON_RETURN_IF_ERROR(Embed(batch, x));
  Rope(n);

  auto norm_rows = [&](const std::vector<float>& weight, const float* in, float* dst) {
    threads_->ParallelFor(n, kTokensPerTask, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        cpu::RmsNorm(in + t * hidden, weight.data(), hidden, eps, dst + t * hidden);
      }
    });
  };
  auto linear = [&](const Linear& lin, const float* in, int64_t in_width, float* dst,
                    int64_t out_width) {
    cpu::MatMul(in, n, in_width, lin.weight, Bias(lin), dst, out_width, threads_);
  };
  auto add_rows = [&](const float* from) {  // x += from, row by row over the threads
    threads_->ParallelFor(n, kTokensPerTask, [&](int64_t begin, int64_t end) {
      cpu::AddInPlace(x + begin * hidden, from + begin * hidden, (end - begin) * hidden);
    });
  };

  for (int64_t l = shard_.layer_begin; l < shard_.layer_end; ++l) {
    const LayerWeights& lw = w.layers[l];
    norm_rows(lw.attn_norm, x, h_.data());
    const cpu::MatMulTarget qkv[] = {{lw.q.weight, Bias(lw.q), q_.data(), q_width},
                                     {lw.k.weight, Bias(lw.k), k_.data(), kv_width},
                                     {lw.v.weight, Bias(lw.v), v_.data(), kv_width}};
    cpu::MatMulShared(h_.data(), n, hidden, qkv, threads_);
    Attention(l, kv);
    if (layer_kv_hook_) layer_kv_hook_(l, batch);
    linear(lw.o, attn_.data(), q_width, h_.data(), hidden);
    BATON_RETURN_IF_ERROR(SumOverTp(h_.data(), n * hidden));
    add_rows(h_.data());

    norm_rows(lw.mlp_norm, x, h_.data());
    const cpu::MatMulTarget gate_up[] = {{lw.gate.weight, Bias(lw.gate), gate_.data(), inter},
                                         {lw.up.weight, Bias(lw.up), up_.data(), inter}};
    cpu::MatMulShared(h_.data(), n, hidden, gate_up, threads_);
    threads_->ParallelFor(n, 1, [&](int64_t begin, int64_t end) {  // one token: no hand-off
      cpu::SwiGlu(gate_.data() + begin * inter, up_.data() + begin * inter, (end - begin) * inter,
                  gate_.data() + begin * inter);
    });
    linear(lw.down, gate_.data(), inter, h_.data(), hidden);
    BATON_RETURN_IF_ERROR(SumOverTp(h_.data(), n * hidden));
    add_rows(h_.data());
  }

  if (shard_.last_stage()) return Logits(batch, x, out);
  return absl::OkStatus();
}

}  // namespace baton::model
