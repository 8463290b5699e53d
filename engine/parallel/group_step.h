// What the leader of a worker group tells every rank each step: which sequences, which
// tokens at which positions, which pages, which logits, and how the batch is cut into
// pipeline micro-batches. The leader's scheduler made the plan; every rank runs it on
// its own shard and pages (the same page ids on every rank).
//
// Wire form (little-endian, our own ranks only, still checked as untrusted):
//   u32 num_seqs, u32 num_micro,
//   num_seqs x {i64 start_pos, i32 num_tokens, i32 num_blocks, i32 logits, u64 kv_push},
//   num_micro x i32 (end of micro-batch, in sequences), then all tokens, then all blocks.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/forward_batch.h"

namespace baton::engine {

// kCall: a request of the leader that every rank answers (GroupBackend::CallRanks); its
// body is the caller's bytes, opaque here.
enum class StepOp : uint32_t { kForward = 1, kKeepAlive = 2, kShutdown = 3, kCall = 4 };

struct GroupStep {
  StepOp op = StepOp::kForward;
  struct Seq {
    int64_t start_pos = 0;
    int32_t num_tokens = 0;
    int32_t num_blocks = 0;
    model::LogitsWanted logits = model::LogitsWanted::kNone;
    uint64_t kv_push = 0;  // SequenceInput::kv_push
  };
  std::vector<Seq> seqs;
  std::vector<int32_t> micro_ends;  // increasing, last == seqs.size()
  std::vector<int32_t> tokens;
  std::vector<int32_t> blocks;
  std::string call;  // kCall's body

  // The batch as the forward takes it; the spans point into this plan.
  std::vector<model::SequenceInput> Inputs() const;
};

struct GroupStepLimits {
  static constexpr int64_t kMaxSeqs = int64_t{1} << 16;
  static constexpr int64_t kMaxTokens = int64_t{1} << 22;
  static constexpr int64_t kMaxBlocks = int64_t{1} << 24;
};

// A plan of `batch`, cut into at most `micro` micro-batches of about equal token counts
// (contiguous runs of sequences; at least one sequence each).
GroupStep PlanGroupStep(std::span<const model::SequenceInput> batch, int micro);

std::string EncodeGroupStep(const GroupStep& plan);
// InvalidArgument naming what is wrong with bytes that are not a well-formed plan:
// truncated, counts past GroupStepLimits, micro-batch ends out of order, trailing bytes.
absl::StatusOr<GroupStep> DecodeGroupStep(StepOp op, std::string_view bytes);

}  // namespace baton::engine
