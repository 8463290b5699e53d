// Which part of a model one rank of a worker group holds, and loading just that part.
//
// A group has tp x pp ranks. Pipeline stage `pp_rank` holds a contiguous run of layers
// (earlier stages take the extra layer when they do not divide evenly). Within a stage,
// tensor-parallel rank `tp_rank` holds a contiguous slice of the query heads, the KV
// heads those queries read, a slice of the MLP's intermediate width, and a slice of the
// vocabulary (embedding and LM-head rows):
//   - column-parallel (rows of W split): q, k, v, gate, up, lm_head, embedding;
//   - row-parallel (columns of W split): o_proj and down_proj, whose partial outputs the
//     group sums (all-reduce); their biases are added once, on tp rank 0.
// How many of each a rank holds, and which splits are allowed: capacity/tp_split.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/model.h"
#include "model/model_config.h"

namespace baton::model {

struct RankPlacement {
  int tp_rank = 0;
  int tp_size = 1;
  int pp_rank = 0;
  int pp_size = 1;
};

struct Shard {
  RankPlacement at;
  int64_t layer_begin = 0, layer_end = 0;  // this stage's layers [begin, end)
  int64_t head_begin = 0, num_heads = 0;   // query heads
  int64_t kv_head_begin = 0, num_kv_heads = 0;
  int64_t inter_begin = 0, inter_size = 0;  // MLP intermediate columns
  int64_t vocab_begin = 0, vocab_size = 0;  // embedding and LM-head rows; may be 0 at the end
  int64_t vocab_shard = 0;                  // ceil(vocab / tp): every rank's slot in a gather

  bool first_stage() const { return at.pp_rank == 0; }
  bool last_stage() const { return at.pp_rank == at.pp_size - 1; }
  int64_t num_layers() const { return layer_end - layer_begin; }
  bool whole() const { return at.tp_size == 1 && at.pp_size == 1; }
};

// InvalidArgument, naming the flag and the model's numbers, when the model cannot be
// split this way: capacity::SplitForTp refuses the tp, or pp exceeds the layers.
absl::StatusOr<Shard> PlanShard(const ModelConfig& config, const RankPlacement& at);

// A model holding only `shard`'s weights, copied out of `full` (so `full` may be closed
// afterwards and its mapped pages leave this process): config() is the full model's;
// weights().layers has config().num_layers entries, of which only the stage's are bound;
// the bound matrices have the shard's rows and columns. Q8_0 needs column slices on
// 32-element blocks. `full` should be opened without prefault, so that only the shard's
// pages are ever read.
absl::StatusOr<std::unique_ptr<Model>> ShardModel(const Model& full, const Shard& shard);

// Opens `path` without prefault and keeps `at`'s shard (the whole model, mapped as
// Model::Open maps it, when the group is one rank).
absl::StatusOr<std::unique_ptr<Model>> OpenShard(const std::string& path, const RankPlacement& at,
                                                 const OpenOptions& options = {});

}  // namespace baton::model
