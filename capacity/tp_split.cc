#include "capacity/tp_split.h"

#include "common/strings.h"

namespace baton::capacity {

absl::StatusOr<TpSplit> SplitForTp(const ModelShape& s, int64_t tp) {
  if (s.heads < 1 || s.kv_heads < 1 || s.intermediate < 1 || s.vocab < 1 ||
      s.heads % s.kv_heads != 0) {
    return absl::InvalidArgumentError(
        StrCat("the model's shape (", s.heads, " heads, ", s.kv_heads, " KV heads, intermediate ",
               s.intermediate, ", vocabulary ", s.vocab, ") is not one a model can have"));
  }
  if (tp < 1) {
    return absl::InvalidArgumentError(StrCat("--tensor-parallel-size ", tp, " must be at least 1"));
  }
  if (s.heads % tp != 0) {
    return absl::InvalidArgumentError(StrCat("--tensor-parallel-size ", tp,
                                             " does not divide the model's ", s.heads,
                                             " attention heads; use a divisor of ", s.heads));
  }
  if (s.kv_heads % tp != 0 && tp % s.kv_heads != 0) {
    return absl::InvalidArgumentError(
        StrCat("--tensor-parallel-size ", tp, " must divide the model's ", s.kv_heads,
               " KV heads or be a multiple of them (each rank holds whole KV heads); use a divisor "
               "of ",
               s.kv_heads, " or a multiple of it that divides ", s.heads));
  }
  if (s.intermediate % tp != 0) {
    return absl::InvalidArgumentError(StrCat("--tensor-parallel-size ", tp,
                                             " does not divide the model's intermediate size ",
                                             s.intermediate));
  }
  TpSplit split;
  split.heads = s.heads / tp;
  split.kv_replicated = tp > s.kv_heads;
  split.kv_heads = split.kv_replicated ? 1 : s.kv_heads / tp;
  split.intermediate = s.intermediate / tp;
  split.vocab_shard = (s.vocab + tp - 1) / tp;
  return split;
}

}  // namespace baton::capacity
