#include "engine/model_runner.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "common/strings.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"
#include "model/rope_frequencies.h"

namespace baton::engine {
namespace {

using model::ModelConfig;

void Grow(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(n);
}

}  // namespace

KvLayout KvLayoutFor(const ModelConfig& config, int64_t block_size) {
  return KvLayout{config.num_layers, config.num_kv_heads, config.head_dim, block_size};
}

ModelRunner::ModelRunner(const model::Model& model, KvPool* pool, ThreadPool* threads)
    : model_(model), config_(model.config()), pool_(pool), threads_(threads) {
  const KvLayout want = KvLayoutFor(config_, pool->layout().block_size);
  const KvLayout& have = pool->layout();
  BATON_CHECK(have.num_layers == want.num_layers && have.num_kv_heads == want.num_kv_heads &&
              have.head_dim == want.head_dim);
  inv_freq_ = model::RopeInverseFrequencies(config_, model.weights().rope_freq_factors);
}

absl::Status ModelRunner::Validate(std::span<const SequenceInput> batch) const {
  const int64_t block_size = pool_->layout().block_size;
  for (size_t s = 0; s < batch.size(); ++s) {
    const SequenceInput& seq = batch[s];
    if (seq.tokens.empty()) {
      return absl::InvalidArgumentError(StrCat("sequence ", s, " of the batch has no tokens"));
    }
    const int64_t end = seq.start_pos + static_cast<int64_t>(seq.tokens.size());
    if (seq.start_pos < 0 || end > config_.max_position_embeddings) {
      return absl::InvalidArgumentError(StrCat("sequence ", s, " reaches position ", end,
                                               "; the model's context is ",
                                               config_.max_position_embeddings, " tokens"));
    }
    const int64_t blocks_needed = (end + block_size - 1) / block_size;
    if (static_cast<int64_t>(seq.block_table.size()) < blocks_needed) {
      return absl::InvalidArgumentError(StrCat("sequence ", s, " needs ", blocks_needed,
                                               " KV blocks, its block table has ",
                                               seq.block_table.size()));
    }
    for (int64_t b = 0; b < blocks_needed; ++b) {
      if (seq.block_table[b] < 0 || seq.block_table[b] >= pool_->num_blocks()) {
        return absl::InvalidArgumentError(StrCat("sequence ", s, " names KV block ",
                                                 seq.block_table[b], "; the pool has ",
                                                 pool_->num_blocks()));
      }
    }
    for (int32_t token : seq.tokens) {
      if (token < 0 || token >= config_.vocab_size) {
        return absl::InvalidArgumentError(
            StrCat("token id ", token, " is outside the vocabulary [0, ", config_.vocab_size, ")"));
      }
    }
  }
  return absl::OkStatus();
}

void ModelRunner::Rope(int64_t num_tokens) {
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

void ModelRunner::Attention(int64_t layer) {
  const int64_t heads = config_.num_heads;
  const int64_t kv_heads = config_.num_kv_heads;
  const int64_t head_dim = config_.head_dim;
  const int64_t group = heads / kv_heads;
  const int64_t q_width = heads * head_dim;
  const int64_t kv_width = kv_heads * head_dim;
  const int64_t block_size = pool_->layout().block_size;
  const bool interleaved = config_.rope_layout == model::RopeLayout::kInterleaved;
  const int64_t half = head_dim / 2;
  const int64_t num_tokens = static_cast<int64_t>(positions_.size());

  // RoPE on q and k, then k/v into their pages.
  for (int64_t t = 0; t < num_tokens; ++t) {
    cpu::ApplyRope(q_.data() + t * q_width, heads, head_dim, cos_.data() + t * half,
                   sin_.data() + t * half, interleaved);
    cpu::ApplyRope(k_.data() + t * kv_width, kv_heads, head_dim, cos_.data() + t * half,
                   sin_.data() + t * half, interleaved);
    const int64_t pos = positions_[t];
    const int32_t block = token_seq_[t]->block_table[pos / block_size];
    const int64_t offset =
        block * pool_->layout().floats_per_block() + (pos % block_size) * kv_width;
    std::copy_n(k_.data() + t * kv_width, kv_width, pool_->layer_k(layer) + offset);
    std::copy_n(v_.data() + t * kv_width, kv_width, pool_->layer_v(layer) + offset);
  }

  const cpu::PagedKvView view{pool_->layer_k(layer),
                              pool_->layer_v(layer),
                              pool_->layout().floats_per_block(),
                              block_size,
                              kv_heads,
                              head_dim};
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

namespace {
const float* Bias(const model::Linear& lin) { return lin.bias.empty() ? nullptr : lin.bias.data(); }
}  // namespace

absl::Status ModelRunner::Forward(std::span<const SequenceInput> batch, ForwardOutput* out) {
  if (auto status = Validate(batch); !status.ok()) return status;
  const model::Weights& w = model_.weights();
  const int64_t hidden = config_.hidden_size;
  const int64_t q_width = config_.num_heads * config_.head_dim;
  const int64_t kv_width = config_.num_kv_heads * config_.head_dim;
  const int64_t inter = config_.intermediate_size;
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
  Grow(x_, n * hidden);
  Grow(h_, n * hidden);
  Grow(q_, n * q_width);
  Grow(k_, n * kv_width);
  Grow(v_, n * kv_width);
  Grow(attn_, n * q_width);
  Grow(gate_, n * inter);
  Grow(up_, n * inter);

  {
    int64_t t = 0;
    for (const SequenceInput& seq : batch) {
      for (int32_t token : seq.tokens) {
        cpu::DequantizeRow(w.embedding, token, x_.data() + t * hidden);
        ++t;
      }
    }
  }
  Rope(n);

  auto norm_rows = [&](const std::vector<float>& weight, const float* in, float* dst) {
    threads_->ParallelFor(n, 16, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        cpu::RmsNorm(in + t * hidden, weight.data(), hidden, eps, dst + t * hidden);
      }
    });
  };
  auto linear = [&](const model::Linear& lin, const float* in, int64_t in_width, float* dst,
                    int64_t out_width) {
    cpu::MatMul(in, n, in_width, lin.weight, lin.bias.empty() ? nullptr : lin.bias.data(), dst,
                out_width, threads_);
  };

  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const model::LayerWeights& lw = w.layers[l];
    norm_rows(lw.attn_norm, x_.data(), h_.data());
    const cpu::MatMulTarget qkv[] = {{lw.q.weight, Bias(lw.q), q_.data(), q_width},
                                     {lw.k.weight, Bias(lw.k), k_.data(), kv_width},
                                     {lw.v.weight, Bias(lw.v), v_.data(), kv_width}};
    cpu::MatMulShared(h_.data(), n, hidden, qkv, threads_);
    Attention(l);
    if (layer_kv_hook_) layer_kv_hook_(l, batch);
    linear(lw.o, attn_.data(), q_width, h_.data(), hidden);
    cpu::AddInPlace(x_.data(), h_.data(), n * hidden);

    norm_rows(lw.mlp_norm, x_.data(), h_.data());
    const cpu::MatMulTarget gate_up[] = {{lw.gate.weight, Bias(lw.gate), gate_.data(), inter},
                                         {lw.up.weight, Bias(lw.up), up_.data(), inter}};
    cpu::MatMulShared(h_.data(), n, hidden, gate_up, threads_);
    threads_->ParallelFor(n, 1, [&](int64_t begin, int64_t end) {  // one token: no hand-off
      cpu::SwiGlu(gate_.data() + begin * inter, up_.data() + begin * inter, (end - begin) * inter,
                  gate_.data() + begin * inter);
    });
    linear(lw.down, gate_.data(), inter, h_.data(), hidden);
    cpu::AddInPlace(x_.data(), h_.data(), n * hidden);
  }

  // Only the rows someone asked logits for go through the final norm and the LM head.
  out->vocab_size = config_.vocab_size;
  out->first_row.assign(batch.size(), -1);
  int64_t rows = 0;
  {
    int64_t t = 0;
    for (size_t s = 0; s < batch.size(); ++s) {
      const int64_t count = static_cast<int64_t>(batch[s].tokens.size());
      int64_t first = t + count, last = t + count;
      if (batch[s].logits == LogitsWanted::kAll) first = t;
      if (batch[s].logits == LogitsWanted::kLast) first = t + count - 1;
      if (first < last) out->first_row[s] = rows;
      for (int64_t r = first; r < last; ++r, ++rows) {
        cpu::RmsNorm(x_.data() + r * hidden, w.final_norm.data(), hidden, eps,
                     h_.data() + rows * hidden);
      }
      t += count;
    }
  }
  out->logits.resize(rows * config_.vocab_size);
  if (rows > 0) {
    cpu::MatMul(h_.data(), rows, hidden, w.lm_head, nullptr, out->logits.data(), config_.vocab_size,
                threads_);
  }
  return absl::OkStatus();
}

}  // namespace baton::engine
