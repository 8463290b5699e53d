// What one tensor-parallel rank holds of a model: a slice of the query heads, the KV
// heads those read, a slice of the MLP's intermediate width and of the vocabulary. The
// one statement of the rule: model/shard.h cuts weights by it, capacity_plan.h counts
// bytes by it.
//
// When tp exceeds the KV heads, each KV head is held by tp / kv_heads ranks, so that
// every rank holds the one KV head its query heads read (vLLM does the same).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "capacity/model_shape.h"

namespace baton::capacity {

struct TpSplit {
  int64_t heads = 0;         // query heads per rank
  int64_t kv_heads = 0;      // KV heads per rank (1 when replicated)
  int64_t intermediate = 0;  // MLP columns per rank
  int64_t vocab_shard = 0;   // ceil(vocab / tp): every rank's slot of embedding rows
  bool kv_replicated = false;
};

// InvalidArgument, naming --tensor-parallel-size and the model's numbers, when the model
// cannot be split this way: tp must divide the query heads, either divide the KV heads or
// be a multiple of them, and divide the intermediate size. Also InvalidArgument for a
// shape that is not a model's (a count below 1, heads not a multiple of the KV heads).
absl::StatusOr<TpSplit> SplitForTp(const ModelShape& shape, int64_t tp);

}  // namespace baton::capacity
