#include "model/shard.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

#include "capacity/tp_split.h"
#include "common/status.h"
#include "common/strings.h"
#include "kernels/cpu/quant_blocks.h"
#include "model/weight_inventory.h"

namespace baton::model {
namespace {

struct AlignedFree {
  void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t(64)); }
};
using Buffer = std::unique_ptr<uint8_t[], AlignedFree>;

class ShardedModel : public Model {
 public:
  ShardedModel(const Model& full, Weights weights, std::vector<Buffer> buffers, uint64_t bytes)
      : buffers_(std::move(buffers)) {
    config_ = full.config();
    weights_ = std::move(weights);
    generation_ = full.generation_defaults();
    path_ = full.path();
    format_ = full.format();
    weight_bytes_ = bytes;
    inventory_ = full.weight_inventory();
  }

 private:
  std::vector<Buffer> buffers_;
};

// Copies slices of the full model's matrices into 64-byte aligned memory of its own.
class Slicer {
 public:
  // Rows [begin, begin + count) of `m`: one contiguous run of its bytes.
  cpu::MatrixRef Rows(const cpu::MatrixRef& m, int64_t begin, int64_t count) {
    const size_t row = cpu::RowBytes(m.dtype, m.cols);
    uint8_t* dst = Allocate(row * count);
    if (count > 0) std::memcpy(dst, static_cast<const uint8_t*>(m.data) + row * begin, row * count);
    return {m.dtype, dst, count, m.cols};
  }
  // Columns [begin, begin + count) of every row.
  absl::StatusOr<cpu::MatrixRef> Cols(const cpu::MatrixRef& m, int64_t begin, int64_t count,
                                      const char* name) {
    const int block = cpu::LayoutOf(m.dtype).elems;
    if (begin % block != 0 || count % block != 0) {
      return absl::InvalidArgumentError(
          StrCat(name, " is ", cpu::DTypeName(m.dtype), " (blocks of ", block,
                 " columns) and the tensor-parallel slice [", begin, ", ", begin + count,
                 ") cuts a block; choose a --tensor-parallel-size that "
                 "gives every rank a multiple of ",
                 block, " columns"));
    }
    const size_t row = cpu::RowBytes(m.dtype, m.cols);
    const size_t skip = cpu::RowBytes(m.dtype, begin);
    const size_t take = cpu::RowBytes(m.dtype, count);
    uint8_t* dst = Allocate(take * m.rows);
    const auto* src = static_cast<const uint8_t*>(m.data);
    for (int64_t r = 0; r < m.rows; ++r) std::memcpy(dst + take * r, src + row * r + skip, take);
    cpu::MatrixRef part = m;
    part.data = dst;
    part.cols = count;
    return part;
  }
  static std::vector<float> Part(const std::vector<float>& v, int64_t begin, int64_t count) {
    if (v.empty()) return {};
    return std::vector<float>(v.begin() + begin, v.begin() + begin + count);
  }

  uint64_t bytes() const { return bytes_; }
  std::vector<Buffer> Take() { return std::move(buffers_); }

 private:
  uint8_t* Allocate(size_t n) {
    bytes_ += n;
    buffers_.emplace_back(
        static_cast<uint8_t*>(::operator new[](std::max<size_t>(n, 1), std::align_val_t(64))));
    return buffers_.back().get();
  }
  std::vector<Buffer> buffers_;
  uint64_t bytes_ = 0;
};

}  // namespace

absl::StatusOr<Shard> PlanShard(const ModelConfig& c, const RankPlacement& at) {
  if (at.tp_size < 1 || at.pp_size < 1 || at.tp_rank < 0 || at.tp_rank >= at.tp_size ||
      at.pp_rank < 0 || at.pp_rank >= at.pp_size) {
    return absl::InvalidArgumentError(StrCat("rank (tp ", at.tp_rank, " of ", at.tp_size, ", pp ",
                                             at.pp_rank, " of ", at.pp_size,
                                             ") is outside its group"));
  }
  // Which heads, MLP columns and vocabulary rows: capacity/tp_split.h's rule, whose
  // refusals name --tensor-parallel-size.
  BATON_ASSIGN_OR_RETURN(const capacity::TpSplit split,
                         capacity::SplitForTp(ShapeOf(c), at.tp_size));
  if (at.pp_size > c.num_layers) {
    return absl::InvalidArgumentError(StrCat("--pipeline-parallel-size ", at.pp_size,
                                             " exceeds the model's ", c.num_layers, " layers"));
  }
  Shard s;
  s.at = at;
  const int64_t per_stage = c.num_layers / at.pp_size, extra = c.num_layers % at.pp_size;
  s.layer_begin = at.pp_rank * per_stage + std::min<int64_t>(at.pp_rank, extra);
  s.layer_end = s.layer_begin + per_stage + (at.pp_rank < extra ? 1 : 0);
  s.num_heads = split.heads;
  s.head_begin = at.tp_rank * s.num_heads;
  s.num_kv_heads = split.kv_heads;
  // Replicated: every query head of this rank reads the one KV head it holds.
  s.kv_head_begin = split.kv_replicated ? s.head_begin / (c.num_heads / c.num_kv_heads)
                                        : at.tp_rank * s.num_kv_heads;
  s.inter_size = split.intermediate;
  s.inter_begin = at.tp_rank * s.inter_size;
  s.vocab_shard = split.vocab_shard;
  s.vocab_begin = std::min<int64_t>(at.tp_rank * s.vocab_shard, c.vocab_size);
  s.vocab_size = std::min<int64_t>(s.vocab_shard, c.vocab_size - s.vocab_begin);
  return s;
}

absl::StatusOr<std::unique_ptr<Model>> ShardModel(const Model& full, const Shard& s) {
  const ModelConfig& c = full.config();
  const Weights& w = full.weights();
  const int64_t hd = c.head_dim;
  Slicer slice;
  Weights out;
  out.rope_freq_factors = w.rope_freq_factors;
  out.layers.resize(c.num_layers);
  const bool tp0 = s.at.tp_rank == 0;
  for (int64_t l = s.layer_begin; l < s.layer_end; ++l) {
    const LayerWeights& in = w.layers[l];
    LayerWeights& o = out.layers[l];
    o.attn_norm = in.attn_norm;
    o.mlp_norm = in.mlp_norm;
    o.q = {slice.Rows(in.q.weight, s.head_begin * hd, s.num_heads * hd),
           Slicer::Part(in.q.bias, s.head_begin * hd, s.num_heads * hd)};
    o.k = {slice.Rows(in.k.weight, s.kv_head_begin * hd, s.num_kv_heads * hd),
           Slicer::Part(in.k.bias, s.kv_head_begin * hd, s.num_kv_heads * hd)};
    o.v = {slice.Rows(in.v.weight, s.kv_head_begin * hd, s.num_kv_heads * hd),
           Slicer::Part(in.v.bias, s.kv_head_begin * hd, s.num_kv_heads * hd)};
    BATON_ASSIGN_OR_RETURN(o.o.weight, slice.Cols(in.o.weight, s.head_begin * hd, s.num_heads * hd,
                                                  StrCat("layer ", l, " o_proj").c_str()));
    if (tp0) o.o.bias = in.o.bias;
    o.gate = {slice.Rows(in.gate.weight, s.inter_begin, s.inter_size),
              Slicer::Part(in.gate.bias, s.inter_begin, s.inter_size)};
    o.up = {slice.Rows(in.up.weight, s.inter_begin, s.inter_size),
            Slicer::Part(in.up.bias, s.inter_begin, s.inter_size)};
    BATON_ASSIGN_OR_RETURN(o.down.weight, slice.Cols(in.down.weight, s.inter_begin, s.inter_size,
                                                     StrCat("layer ", l, " down_proj").c_str()));
    if (tp0) o.down.bias = in.down.bias;
  }
  const bool tied = w.lm_head.data == w.embedding.data;
  if (s.first_stage()) out.embedding = slice.Rows(w.embedding, s.vocab_begin, s.vocab_size);
  if (s.last_stage()) {
    out.final_norm = w.final_norm;
    out.lm_head = tied && s.first_stage() ? out.embedding
                                          : slice.Rows(w.lm_head, s.vocab_begin, s.vocab_size);
  }
  const uint64_t bytes = slice.bytes();
  return std::unique_ptr<Model>(new ShardedModel(full, std::move(out), slice.Take(), bytes));
}

absl::StatusOr<std::unique_ptr<Model>> OpenShard(const std::string& path, const RankPlacement& at,
                                                 const OpenOptions& options) {
  if (at.tp_size == 1 && at.pp_size == 1) return Model::Open(path, options);
  OpenOptions lazy = options;
  lazy.prefault = false;  // only the shard's pages are read, by the copy
  lazy.use_mmap = true;   // a private copy of the whole file would defeat the shard
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<Model> full, Model::Open(path, lazy));
  BATON_ASSIGN_OR_RETURN(Shard shard, PlanShard(full->config(), at));
  return ShardModel(*full, shard);
}

}  // namespace baton::model
