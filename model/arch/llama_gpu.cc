#include "model/arch/llama_gpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/status.h"
#include "common/strings.h"
#include "kernels/cpu/matmul.h"
#include "model/float_convert.h"
#include "model/rope_frequencies.h"

namespace baton::model {
namespace {

using kernels::Bf16Bits;
using kernels::GpuBuffer;
using kernels::GpuOps;

// Copies host bytes into new device memory and waits, so that `host` may go.
absl::StatusOr<GpuBuffer> Upload(GpuOps* ops, const void* host, int64_t bytes) {
  BATON_ASSIGN_OR_RETURN(GpuBuffer b, GpuBuffer::Allocate(ops, bytes));
  BATON_RETURN_IF_ERROR(ops->CopyToDevice(b.get(), host, bytes));
  BATON_RETURN_IF_ERROR(ops->Synchronize());
  return b;
}

absl::StatusOr<GpuBuffer> UploadFloats(GpuOps* ops, const std::vector<float>& v) {
  return Upload(ops, v.data(), static_cast<int64_t>(v.size() * sizeof(float)));
}

// Rows of `m` appended to `out` as bf16: bf16 rows as they are, other types widened to
// f32 first (as the CPU reads them) and rounded to nearest even.
void AppendBf16Rows(const cpu::MatrixRef& m, std::vector<Bf16Bits>* out) {
  const int64_t cols = m.cols;
  const size_t at = out->size();
  out->resize(at + static_cast<size_t>(m.rows * cols));
  Bf16Bits* dst = out->data() + at;
  if (m.dtype == cpu::DType::kBF16) {
    std::memcpy(dst, m.data, static_cast<size_t>(m.rows * cols) * sizeof(Bf16Bits));
    return;
  }
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < m.rows; ++r) {
    cpu::DequantizeRow(m, r, row.data());
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = F32ToBf16(row[c]);
  }
}

// The concatenation of `biases` (each `widths[i]` long; an empty one is zeros), or empty
// when all are empty.
std::vector<float> JoinBiases(std::initializer_list<const std::vector<float>*> biases,
                              std::initializer_list<int64_t> widths) {
  bool any = false;
  for (const auto* b : biases) any |= !b->empty();
  std::vector<float> out;
  if (!any) return out;
  auto w = widths.begin();
  for (const auto* b : biases) {
    if (b->empty()) {
      out.insert(out.end(), static_cast<size_t>(*w), 0.0f);
    } else {
      out.insert(out.end(), b->begin(), b->end());
    }
    ++w;
  }
  return out;
}

class Uploader {
 public:
  Uploader(GpuOps* ops, uint64_t total, const LlamaGpuOptions& options)
      : ops_(ops), total_(total), options_(options) {}

  // Matrices stacked by rows, as one bf16 device matrix of `pad_rows` rows (zeros below).
  absl::StatusOr<GpuBuffer> Matrix(std::initializer_list<const cpu::MatrixRef*> parts,
                                   int64_t pad_rows = 0) {
    std::vector<Bf16Bits> host;
    int64_t rows = 0, cols = 0;
    for (const cpu::MatrixRef* m : parts) {
      AppendBf16Rows(*m, &host);
      rows += m->rows;
      cols = m->cols;
      done_ += cpu::RowBytes(m->dtype, m->cols) * static_cast<uint64_t>(m->rows);
    }
    if (pad_rows > rows) host.resize(static_cast<size_t>(pad_rows * cols), 0);
    BATON_ASSIGN_OR_RETURN(
        GpuBuffer b,
        Upload(ops_, host.data(), static_cast<int64_t>(host.size() * sizeof(Bf16Bits))));
    bytes_ += static_cast<uint64_t>(b.bytes());
    if (options_.progress) options_.progress(done_, total_);
    return b;
  }

  absl::StatusOr<GpuBuffer> Floats(const std::vector<float>& v) {
    if (v.empty()) return GpuBuffer();
    BATON_ASSIGN_OR_RETURN(GpuBuffer b, UploadFloats(ops_, v));
    bytes_ += static_cast<uint64_t>(b.bytes());
    return b;
  }

  uint64_t bytes() const { return bytes_; }

 private:
  GpuOps* ops_;
  uint64_t total_;
  const LlamaGpuOptions& options_;
  uint64_t done_ = 0;
  uint64_t bytes_ = 0;
};

uint64_t MatrixBytes(const cpu::MatrixRef& m) {
  return m.data == nullptr ? 0 : cpu::RowBytes(m.dtype, m.cols) * static_cast<uint64_t>(m.rows);
}

}  // namespace

absl::StatusOr<LlamaGpuWeights> UploadLlamaWeights(const Model& model, const Shard& shard,
                                                   GpuOps* ops, const LlamaGpuOptions& options) {
  const ModelConfig& c = model.config();
  const Weights& w = model.weights();
  uint64_t total = 0;
  for (int64_t l = shard.layer_begin; l < shard.layer_end; ++l) {
    const LayerWeights& lw = w.layers[l];
    for (const Linear* lin : {&lw.q, &lw.k, &lw.v, &lw.o, &lw.gate, &lw.up, &lw.down}) {
      total += MatrixBytes(lin->weight);
    }
  }
  const bool tied = w.lm_head.data == w.embedding.data;
  if (shard.first_stage() || (shard.last_stage() && tied)) total += MatrixBytes(w.embedding);
  if (shard.last_stage() && !tied) total += MatrixBytes(w.lm_head);

  Uploader up(ops, total, options);
  LlamaGpuWeights out;
  // The embedding and the head have vocab_shard rows on every rank, so that the ranks'
  // logits are the same size for the gather; the padding rows are zeros.
  if (shard.first_stage() || (shard.last_stage() && tied)) {
    BATON_ASSIGN_OR_RETURN(out.embedding, up.Matrix({&w.embedding}, shard.vocab_shard));
  }
  if (shard.last_stage()) {
    if (!tied) {
      BATON_ASSIGN_OR_RETURN(out.lm_head, up.Matrix({&w.lm_head}, shard.vocab_shard));
    }
    BATON_ASSIGN_OR_RETURN(out.final_norm, up.Floats(w.final_norm));
  }
  const int64_t hd = c.head_dim;
  for (int64_t l = shard.layer_begin; l < shard.layer_end; ++l) {
    const LayerWeights& lw = w.layers[l];
    LlamaGpuWeights::Layer g;
    BATON_ASSIGN_OR_RETURN(g.attn_norm, up.Floats(lw.attn_norm));
    BATON_ASSIGN_OR_RETURN(g.mlp_norm, up.Floats(lw.mlp_norm));
    BATON_ASSIGN_OR_RETURN(g.qkv, up.Matrix({&lw.q.weight, &lw.k.weight, &lw.v.weight}));
    BATON_ASSIGN_OR_RETURN(g.o, up.Matrix({&lw.o.weight}));
    BATON_ASSIGN_OR_RETURN(g.gate_up, up.Matrix({&lw.gate.weight, &lw.up.weight}));
    BATON_ASSIGN_OR_RETURN(g.down, up.Matrix({&lw.down.weight}));
    BATON_ASSIGN_OR_RETURN(
        g.qkv_bias, up.Floats(JoinBiases(
                        {&lw.q.bias, &lw.k.bias, &lw.v.bias},
                        {shard.num_heads * hd, shard.num_kv_heads * hd, shard.num_kv_heads * hd})));
    BATON_ASSIGN_OR_RETURN(g.o_bias, up.Floats(lw.o.bias));
    BATON_ASSIGN_OR_RETURN(
        g.gate_up_bias,
        up.Floats(JoinBiases({&lw.gate.bias, &lw.up.bias}, {shard.inter_size, shard.inter_size})));
    BATON_ASSIGN_OR_RETURN(g.down_bias, up.Floats(lw.down.bias));
    out.layers.push_back(std::move(g));
  }
  // RoPE angles exactly as LlamaForward::Rope computes them.
  const std::vector<double> inv_freq = RopeInverseFrequencies(c, w.rope_freq_factors);
  const int64_t half = hd / 2;
  std::vector<float> cos_table(static_cast<size_t>(c.max_position_embeddings * half));
  std::vector<float> sin_table(cos_table.size());
  for (int64_t p = 0; p < c.max_position_embeddings; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(p) * inv_freq[i];
      cos_table[p * half + i] = static_cast<float>(std::cos(angle));
      sin_table[p * half + i] = static_cast<float>(std::sin(angle));
    }
  }
  BATON_ASSIGN_OR_RETURN(out.rope_cos, up.Floats(cos_table));
  BATON_ASSIGN_OR_RETURN(out.rope_sin, up.Floats(sin_table));
  out.bytes = up.bytes();
  return out;
}

LlamaGpuForward::LlamaGpuForward(const Model& model, const Shard& shard, GpuOps* ops,
                                 parallel::Communicator* tp, const LlamaGpuOptions& options)
    : config_(model.config()), shard_(shard), ops_(ops), tp_(tp), options_(options) {
  q_width_ = shard.num_heads * config_.head_dim;
  kv_width_ = shard.num_kv_heads * config_.head_dim;
  qkv_width_ = q_width_ + 2 * kv_width_;
  inter_ = shard.inter_size;
}

LlamaGpuForward::~LlamaGpuForward() {
  graphs_.clear();
  if (meta_host_ != nullptr) ops_->FreeHost(meta_host_);
}

absl::StatusOr<std::unique_ptr<LlamaGpuForward>> LlamaGpuForward::Create(
    const Model& model, const Shard& shard, GpuOps* ops, parallel::Communicator* tp,
    const LlamaGpuOptions& options) {
  if (shard.at.pp_size != 1) {
    return absl::UnimplementedError(
        "pipeline parallelism on the GPU backend is not built yet; run --device cuda with "
        "--pipeline-parallel-size 1");
  }
  if (shard.at.tp_size > 1 &&
      (tp == nullptr || tp->size() != shard.at.tp_size || tp->rank() != shard.at.tp_rank)) {
    return absl::InvalidArgumentError("the GPU forward's communicator does not match its shard");
  }
  if (options.max_tokens < 1 || options.max_seqs < 1 || options.max_seqs > options.max_tokens) {
    return absl::InvalidArgumentError(StrCat("the GPU forward needs 1 <= max_seqs (",
                                             options.max_seqs, ") <= max_tokens (",
                                             options.max_tokens, ")"));
  }
  std::unique_ptr<LlamaGpuForward> f(new LlamaGpuForward(model, shard, ops, tp, options));
  BATON_ASSIGN_OR_RETURN(f->weights_, UploadLlamaWeights(model, shard, ops, options));
  BATON_RETURN_IF_ERROR(f->Allocate());
  return f;
}

absl::Status LlamaGpuForward::Allocate() {
  const int64_t t = options_.max_tokens;
  const int64_t hidden = config_.hidden_size;
  auto alloc = [&](GpuBuffer* b, int64_t bytes) -> absl::Status {
    BATON_ASSIGN_OR_RETURN(*b, GpuBuffer::Allocate(ops_, std::max<int64_t>(bytes, 256)));
    return absl::OkStatus();
  };
  BATON_RETURN_IF_ERROR(alloc(&x_, t * hidden * 4));
  BATON_RETURN_IF_ERROR(alloc(&h_, t * hidden * 2));
  BATON_RETURN_IF_ERROR(alloc(&qkv_, t * qkv_width_ * 4));
  BATON_RETURN_IF_ERROR(alloc(&attn_, t * q_width_ * 4));
  BATON_RETURN_IF_ERROR(alloc(&attn_bf16_, t * q_width_ * 2));
  BATON_RETURN_IF_ERROR(alloc(&proj_, t * hidden * 4));
  BATON_RETURN_IF_ERROR(alloc(&gate_up_, t * 2 * inter_ * 4));
  BATON_RETURN_IF_ERROR(alloc(&act_, t * inter_ * 2));
  if (shard_.last_stage()) {
    const int64_t rows = LogitRowsPerPass();
    BATON_RETURN_IF_ERROR(alloc(&logit_x_, rows * hidden * 4));
    BATON_RETURN_IF_ERROR(alloc(&logit_h_, rows * hidden * 2));
    BATON_RETURN_IF_ERROR(alloc(&logits_, rows * shard_.vocab_shard * 4));
    BATON_RETURN_IF_ERROR(alloc(&greedy_, rows * 4));
    if (shard_.at.tp_size > 1) {
      BATON_RETURN_IF_ERROR(
          alloc(&logits_gathered_, rows * shard_.vocab_shard * 4 * shard_.at.tp_size));
    }
  }
  // Decode attention's scratch: at least one sequence at the longest context a graph
  // bucket may launch for.
  const int64_t one = ops_->DecodeWorkspaceBytes(
      1, static_cast<int>(shard_.num_heads), static_cast<int>(config_.head_dim),
      GraphContextBucket(static_cast<int>(config_.max_position_embeddings)));
  BATON_RETURN_IF_ERROR(alloc(&decode_workspace_, std::max(options_.decode_workspace_bytes, one)));
  return absl::OkStatus();
}

absl::Status LlamaGpuForward::BindKv(const KvPages& kv) {
  const ModelConfig& c = config_;
  const int64_t rows = kv.block_size * c.head_dim;
  if (kv.data == nullptr || kv.num_pages < 1 || kv.block_size < 1 || kv.rows_elements != rows ||
      kv.head_stride != 2 * rows || kv.layer_elements != shard_.num_kv_heads * 2 * rows ||
      kv.page_elements != shard_.num_layers() * kv.layer_elements) {
    return absl::InvalidArgumentError(
        StrCat("the GPU KV pages (", kv.num_pages, " pages of ", kv.page_elements, " elements, ",
               kv.layer_elements, " a layer, block size ", kv.block_size,
               ") do not match the model's shard (", shard_.num_layers(), " layers of ",
               shard_.num_kv_heads, " KV heads of head_dim ", c.head_dim, ")"));
  }
  kv_ = kv;
  graphs_.clear();  // they hold the old pages' addresses
  // The packed plan of the largest step: every list at its capacity, block tables as wide
  // as the largest graph bucket's (which covers the longest context).
  GpuStepShape most;
  most.tokens = most.logit_rows = static_cast<int>(options_.max_tokens);
  most.decode_seqs = most.prefill_seqs = static_cast<int>(options_.max_seqs);
  most.decode_blocks = most.prefill_blocks = static_cast<int>(
      (GraphContextBucket(static_cast<int>(c.max_position_embeddings)) + kv.block_size - 1) /
      kv.block_size);
  meta_capacity_ = GpuStepOffsets(most).total;
  BATON_ASSIGN_OR_RETURN(meta_, GpuBuffer::Allocate(ops_, meta_capacity_ * 4));
  if (meta_host_ != nullptr) ops_->FreeHost(meta_host_);
  meta_host_ = nullptr;
  BATON_ASSIGN_OR_RETURN(meta_host_, ops_->MallocHost(meta_capacity_ * 4));
  return absl::OkStatus();
}

int64_t LlamaGpuForward::LogitRowsPerPass() const {
  return std::min(options_.max_tokens, std::max<int64_t>(options_.max_seqs, kMaxGraphBatch));
}

kernels::GpuKvLayer LlamaGpuForward::KvLayer(int64_t stage_layer) const {
  kernels::GpuKvLayer l;
  l.base = kv_.k(stage_layer);
  l.bf16 = kv_.dtype == cpu::KvDtype::kBf16;
  l.page_stride = kv_.page_elements;
  l.head_stride = kv_.head_stride;
  l.rows = kv_.rows_elements;
  l.block_size = static_cast<int>(kv_.block_size);
  l.head_dim = static_cast<int>(config_.head_dim);
  return l;
}

absl::Status LlamaGpuForward::SumOverTp(float* data, int64_t n) {
  if (shard_.at.tp_size == 1) return absl::OkStatus();
  // The communicator works on memory the device has finished writing.
  BATON_RETURN_IF_ERROR(ops_->Synchronize());
  return tp_->AllReduceSum(std::span<float>(data, static_cast<size_t>(n)));
}

absl::Status LlamaGpuForward::DecodeAttention(const GpuStepPlan& plan,
                                              const kernels::GpuKvLayer& layer, const float* q,
                                              float* out) {
  const GpuStepShape& s = plan.shape;
  const int heads = static_cast<int>(shard_.num_heads);
  const int kv_heads = static_cast<int>(shard_.num_kv_heads);
  const int hd = static_cast<int>(config_.head_dim);
  // Sequences per kernel call, so that the scratch fits: each sequence's work is the same
  // in any call, so the cut changes no result.
  const int64_t per_seq = ops_->DecodeWorkspaceBytes(1, heads, hd, s.max_context);
  const int chunk = static_cast<int>(std::clamp<int64_t>(
      decode_workspace_.bytes() / std::max<int64_t>(per_seq, 1), 1, s.decode_seqs));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int s0 = 0; s0 < s.decode_seqs; s0 += chunk) {
    const int count = std::min(chunk, s.decode_seqs - s0);
    BATON_RETURN_IF_ERROR(
        ops_->DecodeAttention(q, qkv_width_, Meta(plan.at.decode_rows + s0), layer,
                              Meta(plan.at.decode_tables + int64_t{s0} * s.decode_blocks),
                              s.decode_blocks, Meta(plan.at.decode_context + s0), count, heads,
                              kv_heads, s.max_context, scale, decode_workspace_.get(), out));
  }
  return absl::OkStatus();
}

absl::Status LlamaGpuForward::Enqueue(const GpuStepPlan& plan) {
  const GpuStepShape& s = plan.shape;
  const LlamaGpuWeights& w = weights_;
  const int n = s.tokens;
  const int hidden = static_cast<int>(config_.hidden_size);
  const int heads = static_cast<int>(shard_.num_heads);
  const int kv_heads = static_cast<int>(shard_.num_kv_heads);
  const int hd = static_cast<int>(config_.head_dim);
  const int qkv = static_cast<int>(qkv_width_);
  const int qw = static_cast<int>(q_width_);
  const int inter = static_cast<int>(inter_);
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  float* x = x_.as<float>();
  float* proj = proj_.as<float>();
  Bf16Bits* h = h_.as<Bf16Bits>();
  float* qkv_out = qkv_.as<float>();
  auto bias = [](const GpuBuffer& b) { return b.get() == nullptr ? nullptr : b.as<float>(); };

  if (shard_.first_stage()) {
    BATON_RETURN_IF_ERROR(ops_->Embed(w.embedding.as<Bf16Bits>(), shard_.vocab_size,
                                      shard_.vocab_begin, hidden, Meta(plan.at.token_ids), n, x));
    BATON_RETURN_IF_ERROR(SumOverTp(x, int64_t{n} * hidden));
  }
  for (int64_t l = shard_.layer_begin; l < shard_.layer_end; ++l) {
    const int64_t stage_layer = l - shard_.layer_begin;
    const LlamaGpuWeights::Layer& lw = w.layers[stage_layer];
    // The residual add of the previous layer's MLP is fused into this layer's first norm.
    if (stage_layer == 0) {
      BATON_RETURN_IF_ERROR(ops_->RmsNorm(x, lw.attn_norm.as<float>(), n, hidden, eps, h));
    } else {
      BATON_RETURN_IF_ERROR(ops_->AddRmsNorm(x, proj, lw.attn_norm.as<float>(), n, hidden, eps, h));
    }
    BATON_RETURN_IF_ERROR(
        ops_->Linear(h, lw.qkv.as<Bf16Bits>(), bias(lw.qkv_bias), n, qkv, hidden, qkv_out));
    BATON_RETURN_IF_ERROR(ops_->RopeQk(
        qkv_out, n, qkv, heads, kv_heads, hd, Meta(plan.at.positions), w.rope_cos.as<float>(),
        w.rope_sin.as<float>(), config_.rope_layout == RopeLayout::kInterleaved));
    const kernels::GpuKvLayer layer = KvLayer(stage_layer);
    BATON_RETURN_IF_ERROR(ops_->WriteKv(layer, kv_heads, qkv_out + qw, qkv_out + qw + kv_width_,
                                        qkv, Meta(plan.at.slot_pages), Meta(plan.at.slot_rows), n));
    if (s.decode_seqs > 0) {
      BATON_RETURN_IF_ERROR(DecodeAttention(plan, layer, qkv_out, attn_.as<float>()));
    }
    if (s.prefill_seqs > 0) {
      BATON_RETURN_IF_ERROR(ops_->PrefillAttention(
          qkv_out, qkv, layer, Meta(plan.at.prefill_tables), s.prefill_blocks,
          Meta(plan.at.prefill_starts), Meta(plan.at.prefill_lens), Meta(plan.at.prefill_context),
          s.prefill_seqs, s.max_query_len, heads, kv_heads, scale, attn_.as<float>()));
    }
    BATON_RETURN_IF_ERROR(
        ops_->ToBf16(attn_.as<float>(), int64_t{n} * qw, attn_bf16_.as<Bf16Bits>()));
    BATON_RETURN_IF_ERROR(ops_->Linear(attn_bf16_.as<Bf16Bits>(), lw.o.as<Bf16Bits>(),
                                       bias(lw.o_bias), n, hidden, qw, proj));
    BATON_RETURN_IF_ERROR(SumOverTp(proj, int64_t{n} * hidden));
    BATON_RETURN_IF_ERROR(ops_->AddRmsNorm(x, proj, lw.mlp_norm.as<float>(), n, hidden, eps, h));
    BATON_RETURN_IF_ERROR(ops_->Linear(h, lw.gate_up.as<Bf16Bits>(), bias(lw.gate_up_bias), n,
                                       2 * inter, hidden, gate_up_.as<float>()));
    BATON_RETURN_IF_ERROR(ops_->SwiGlu(gate_up_.as<float>(), n, inter, act_.as<Bf16Bits>()));
    BATON_RETURN_IF_ERROR(ops_->Linear(act_.as<Bf16Bits>(), lw.down.as<Bf16Bits>(),
                                       bias(lw.down_bias), n, hidden, inter, proj));
    BATON_RETURN_IF_ERROR(SumOverTp(proj, int64_t{n} * hidden));
  }
  BATON_RETURN_IF_ERROR(ops_->Add(x, proj, int64_t{n} * hidden));
  if (shard_.last_stage() && s.logit_rows > 0 && s.logit_rows <= LogitRowsPerPass()) {
    BATON_RETURN_IF_ERROR(LogitsPass(plan, 0, s.logit_rows));
  }
  return absl::OkStatus();
}

absl::Status LlamaGpuForward::LogitsPass(const GpuStepPlan& plan, int first, int count) {
  const int hidden = static_cast<int>(config_.hidden_size);
  const Bf16Bits* head =
      (weights_.lm_head.get() != nullptr ? weights_.lm_head : weights_.embedding).as<Bf16Bits>();
  BATON_RETURN_IF_ERROR(ops_->GatherRows(x_.as<float>(), hidden, Meta(plan.at.logit_rows + first),
                                         count, logit_x_.as<float>()));
  BATON_RETURN_IF_ERROR(ops_->RmsNorm(logit_x_.as<float>(), weights_.final_norm.as<float>(), count,
                                      hidden, static_cast<float>(config_.rms_norm_eps),
                                      logit_h_.as<Bf16Bits>()));
  BATON_RETURN_IF_ERROR(ops_->Linear(logit_h_.as<Bf16Bits>(), head, nullptr, count,
                                     static_cast<int>(shard_.vocab_shard), hidden,
                                     logits_.as<float>()));
  // The greedy choice of every row (a tensor-parallel rank holds a slice of the row, so
  // only a single rank can choose): cheap beside the head, and then a greedy sequence's
  // row need not cross to the host.
  if (shard_.at.tp_size > 1) return absl::OkStatus();
  return ops_->ArgMax(logits_.as<float>(), config_.vocab_size, count, greedy_.as<int32_t>());
}

absl::Status LlamaGpuForward::CopyLogits(int count, float* dst) {
  const int64_t vocab = config_.vocab_size;
  const int64_t shard = shard_.vocab_shard;
  const int tp = shard_.at.tp_size;
  if (tp == 1) {
    return ops_->CopyToHost(dst, logits_.get(), int64_t{count} * vocab * 4);
  }
  // Every rank's slice of the vocabulary, side by side per rank, then laid out per row.
  BATON_RETURN_IF_ERROR(ops_->Synchronize());
  const size_t part = static_cast<size_t>(count) * static_cast<size_t>(shard);
  BATON_RETURN_IF_ERROR(tp_->AllGather(
      std::as_bytes(std::span<const float>(logits_.as<float>(), part)),
      std::as_writable_bytes(std::span<float>(logits_gathered_.as<float>(), part * tp))));
  gathered_.resize(part * tp);
  BATON_RETURN_IF_ERROR(ops_->CopyToHost(gathered_.data(), logits_gathered_.get(),
                                         static_cast<int64_t>(part * tp * sizeof(float))));
  for (int r = 0; r < tp; ++r) {
    const int64_t begin = r * shard;
    const int64_t width = std::max<int64_t>(0, std::min(shard, vocab - begin));
    for (int64_t i = 0; i < count; ++i) {
      std::memcpy(dst + i * vocab + begin, gathered_.data() + (r * count + i) * shard,
                  static_cast<size_t>(width) * sizeof(float));
    }
  }
  return absl::OkStatus();
}

absl::Status LlamaGpuForward::Forward(std::span<const SequenceInput> batch, ForwardOutput* out) {
  if (kv_.data == nullptr) {
    return absl::FailedPreconditionError("the GPU forward has no KV pages yet (BindKv)");
  }
  GpuStepShape shape = GpuStepShapeOf(batch, kv_.block_size);
  if (shape.tokens > options_.max_tokens ||
      static_cast<int64_t>(batch.size()) > options_.max_seqs) {
    return absl::InvalidArgumentError(StrCat("the step has ", shape.tokens, " tokens and ",
                                             batch.size(), " sequences; the GPU forward takes ",
                                             options_.max_tokens, " and ", options_.max_seqs));
  }
  bool graph = false;
  if (options_.use_graphs && shard_.at.tp_size == 1) {
    const GpuStepShape bucket = GraphBucketFor(
        batch, kv_.block_size, config_.max_position_embeddings,
        static_cast<int>(std::min<int64_t>(options_.max_graph_batch, options_.max_seqs)));
    if (bucket.tokens > 0) {
      shape = bucket;
      graph = true;
    }
  }
  GpuStepPlan plan;
  BATON_RETURN_IF_ERROR(BuildGpuStepPlan(batch, kv_.block_size, shape, &plan));
  if (plan.at.total > meta_capacity_) {
    return absl::InternalError(StrCat("the step's plan needs ", plan.at.total,
                                      " int32, the staging holds ", meta_capacity_));
  }
  std::memcpy(meta_host_, plan.packed.data(), plan.packed.size() * sizeof(int32_t));
  BATON_RETURN_IF_ERROR(
      ops_->CopyToDevice(meta_.get(), meta_host_, static_cast<int64_t>(plan.packed.size() * 4)));
  if (graph) {
    const std::pair<int, int> key(shape.tokens, shape.max_context);
    auto it = graphs_.find(key);
    if (it == graphs_.end()) {
      BATON_RETURN_IF_ERROR(ops_->BeginCapture());
      absl::Status enqueued = Enqueue(plan);
      absl::StatusOr<std::unique_ptr<kernels::GpuGraph>> captured = ops_->EndCapture();
      BATON_RETURN_IF_ERROR(enqueued);
      BATON_RETURN_IF_ERROR(captured.status());
      it = graphs_.emplace(key, std::move(*captured)).first;
    }
    BATON_RETURN_IF_ERROR(ops_->Launch(*it->second));
    ++graph_replays_;
  } else {
    BATON_RETURN_IF_ERROR(Enqueue(plan));
  }
  if (!shard_.last_stage()) return ops_->Synchronize();

  return CopyOut(plan, batch, out);
}

absl::Status LlamaGpuForward::CopyOut(const GpuStepPlan& plan, std::span<const SequenceInput> batch,
                                      ForwardOutput* out) {
  // The device's rows are every wanted row in batch order (padding rows stay behind). The
  // host gets the greedy ids, and the rows of the sequences that need more than the id.
  const int64_t vocab = config_.vocab_size;
  std::vector<int64_t> device_row;
  const int64_t rows = PlanLogitRows(batch, &device_row);
  out->vocab_size = vocab;
  out->first_row.assign(batch.size(), -1);
  out->greedy_ids.clear();
  if (rows == 0) {
    out->logits.clear();
    return ops_->Synchronize();
  }
  const bool ids_here = shard_.at.tp_size == 1;
  int64_t host_rows = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    if (device_row[s] < 0) continue;
    if (ids_here && batch[s].greedy && batch[s].logits == LogitsWanted::kLast) continue;
    out->first_row[s] = host_rows;
    host_rows +=
        batch[s].logits == LogitsWanted::kAll ? static_cast<int64_t>(batch[s].tokens.size()) : 1;
  }
  out->logits.resize(static_cast<size_t>(host_rows * vocab));
  const int per_pass = static_cast<int>(LogitRowsPerPass());
  greedy_host_.resize(static_cast<size_t>(rows));
  // Pass by pass (one pass but for prompt logits of long chunks): the rows of a pass, then
  // the host's runs of them.
  for (int first = 0; first < rows; first += per_pass) {
    const int count = static_cast<int>(std::min<int64_t>(per_pass, rows - first));
    if (rows > per_pass) BATON_RETURN_IF_ERROR(LogitsPass(plan, first, count));
    if (ids_here) {
      BATON_RETURN_IF_ERROR(
          ops_->CopyToHost(greedy_host_.data() + first, greedy_.get(), int64_t{count} * 4));
    }
    BATON_RETURN_IF_ERROR(CopyRows(batch, device_row, out, first, count));
  }
  if (ids_here) {
    out->greedy_ids.assign(batch.size(), -1);
    for (size_t s = 0; s < batch.size(); ++s) {
      if (device_row[s] < 0 || out->first_row[s] >= 0) continue;
      const int32_t id = greedy_host_[device_row[s]];
      // An all-NaN row (ArgMax gives vocab): what the CPU sampler picks, which reads NaN
      // as -inf and takes the first of equal maxima, id 0.
      out->greedy_ids[s] = id < vocab ? id : 0;
    }
  }
  return ops_->Synchronize();
}

absl::Status LlamaGpuForward::CopyRows(std::span<const SequenceInput> batch,
                                       const std::vector<int64_t>& device_row, ForwardOutput* out,
                                       int first, int count) {
  const int64_t vocab = config_.vocab_size;
  if (shard_.at.tp_size > 1) {
    // Every rank's slice, gathered; every row of the pass is wanted (no greedy ids here).
    return CopyLogits(count, out->logits.data() + int64_t{first} * vocab);
  }
  // Runs of consecutive device rows that go to consecutive host rows: one copy each.
  int64_t run_device = -1, run_host = -1, run_rows = 0;
  auto flush = [&]() -> absl::Status {
    if (run_rows == 0) return absl::OkStatus();
    absl::Status copied =
        ops_->CopyToHost(out->logits.data() + run_host * vocab,
                         logits_.as<float>() + (run_device - first) * vocab, run_rows * vocab * 4);
    run_rows = 0;
    return copied;
  };
  for (size_t s = 0; s < batch.size(); ++s) {
    if (out->first_row[s] < 0) continue;
    const int64_t n =
        batch[s].logits == LogitsWanted::kAll ? static_cast<int64_t>(batch[s].tokens.size()) : 1;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t d = device_row[s] + i, h = out->first_row[s] + i;
      if (d < first || d >= first + count) continue;
      if (run_rows > 0 && d == run_device + run_rows && h == run_host + run_rows) {
        ++run_rows;
        continue;
      }
      BATON_RETURN_IF_ERROR(flush());
      run_device = d;
      run_host = h;
      run_rows = 1;
    }
  }
  return flush();
}

}  // namespace baton::model
