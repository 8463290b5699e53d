#include "engine/parallel/group_step.h"

#include <cstring>

#include "common/strings.h"

namespace baton::engine {
namespace {

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  template <typename T>
  bool Get(T* v) {
    if (bytes_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool GetInts(std::vector<int32_t>* v, int64_t n) {
    if (static_cast<int64_t>((bytes_.size() - pos_) / sizeof(int32_t)) < n) return false;
    v->resize(n);
    if (n > 0) std::memcpy(v->data(), bytes_.data() + pos_, n * sizeof(int32_t));
    pos_ += n * sizeof(int32_t);
    return true;
  }
  bool done() const { return pos_ == bytes_.size(); }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

absl::Status Bad(std::string_view what) {
  return absl::InvalidArgumentError(StrCat("group step: ", what));
}

}  // namespace

std::vector<model::SequenceInput> GroupStep::Inputs() const {
  std::vector<model::SequenceInput> out;
  out.reserve(seqs.size());
  size_t t = 0, b = 0;
  for (const Seq& s : seqs) {
    out.push_back({std::span<const int32_t>(tokens).subspan(t, s.num_tokens), s.start_pos,
                   std::span<const int32_t>(blocks).subspan(b, s.num_blocks), s.logits, s.kv_push});
    t += s.num_tokens;
    b += s.num_blocks;
  }
  return out;
}

GroupStep PlanGroupStep(std::span<const model::SequenceInput> batch, int micro) {
  GroupStep plan;
  int64_t total = 0;
  for (const model::SequenceInput& in : batch) {
    plan.seqs.push_back({in.start_pos, static_cast<int32_t>(in.tokens.size()),
                         static_cast<int32_t>(in.block_table.size()), in.logits, in.kv_push});
    plan.tokens.insert(plan.tokens.end(), in.tokens.begin(), in.tokens.end());
    plan.blocks.insert(plan.blocks.end(), in.block_table.begin(), in.block_table.end());
    total += static_cast<int64_t>(in.tokens.size());
  }
  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(micro, n));
  // Cut where the tokens before reach k/parts of the total, one sequence at least each.
  int64_t before = 0;
  for (int64_t s = 0; s < n; ++s) {
    before += static_cast<int64_t>(batch[s].tokens.size());
    const int64_t cuts_made = static_cast<int64_t>(plan.micro_ends.size());
    const int64_t left_seqs = n - (s + 1);
    const int64_t left_cuts = parts - cuts_made - 1;
    if (cuts_made + 1 < parts &&
        (before * parts >= total * (cuts_made + 1) || left_seqs == left_cuts)) {
      plan.micro_ends.push_back(static_cast<int32_t>(s + 1));
    }
  }
  plan.micro_ends.push_back(static_cast<int32_t>(n));
  return plan;
}

std::string EncodeGroupStep(const GroupStep& plan) {
  std::string out;
  out.reserve(8 + plan.seqs.size() * 28 +
              (plan.micro_ends.size() + plan.tokens.size() + plan.blocks.size()) * 4);
  Put<uint32_t>(&out, static_cast<uint32_t>(plan.seqs.size()));
  Put<uint32_t>(&out, static_cast<uint32_t>(plan.micro_ends.size()));
  for (const GroupStep::Seq& s : plan.seqs) {
    Put<int64_t>(&out, s.start_pos);
    Put<int32_t>(&out, s.num_tokens);
    Put<int32_t>(&out, s.num_blocks);
    Put<int32_t>(&out, static_cast<int32_t>(s.logits));
    Put<uint64_t>(&out, s.kv_push);
  }
  for (int32_t e : plan.micro_ends) Put<int32_t>(&out, e);
  for (const std::vector<int32_t>* ints : {&plan.tokens, &plan.blocks}) {
    if (!ints->empty()) out.append(reinterpret_cast<const char*>(ints->data()), ints->size() * 4);
  }
  return out;
}

absl::StatusOr<GroupStep> DecodeGroupStep(StepOp op, std::string_view bytes) {
  GroupStep plan;
  plan.op = op;
  if (op == StepOp::kCall) {
    plan.call = std::string(bytes);
    return plan;
  }
  if (op != StepOp::kForward) {
    if (!bytes.empty()) return Bad("a control message carries a body");
    return plan;
  }
  Reader r(bytes);
  uint32_t num_seqs = 0, num_micro = 0;
  if (!r.Get(&num_seqs) || !r.Get(&num_micro)) return Bad("truncated header");
  if (num_seqs == 0 || num_seqs > GroupStepLimits::kMaxSeqs) {
    return Bad(StrCat(num_seqs, " sequences; a plan has 1 to ", GroupStepLimits::kMaxSeqs));
  }
  if (num_micro == 0 || num_micro > num_seqs) {
    return Bad(StrCat(num_micro, " micro-batches for ", num_seqs, " sequences"));
  }
  int64_t tokens = 0, blocks = 0;
  plan.seqs.resize(num_seqs);
  for (GroupStep::Seq& s : plan.seqs) {
    int32_t logits = 0;
    if (!r.Get(&s.start_pos) || !r.Get(&s.num_tokens) || !r.Get(&s.num_blocks) || !r.Get(&logits) ||
        !r.Get(&s.kv_push)) {
      return Bad("truncated sequence header");
    }
    if (s.start_pos < 0 || s.num_tokens < 1 || s.num_blocks < 0 || logits < 0 || logits > 2) {
      return Bad("a sequence header is out of range");
    }
    s.logits = static_cast<model::LogitsWanted>(logits);
    tokens += s.num_tokens;
    blocks += s.num_blocks;
    if (tokens > GroupStepLimits::kMaxTokens || blocks > GroupStepLimits::kMaxBlocks) {
      return Bad("more tokens or blocks than a plan may carry");
    }
  }
  if (!r.GetInts(&plan.micro_ends, num_micro)) return Bad("truncated micro-batch ends");
  int32_t prev = 0;
  for (int32_t e : plan.micro_ends) {
    if (e <= prev || e > static_cast<int32_t>(num_seqs))
      return Bad("micro-batch ends out of order");
    prev = e;
  }
  if (prev != static_cast<int32_t>(num_seqs))
    return Bad("the micro-batches do not cover the batch");
  if (!r.GetInts(&plan.tokens, tokens) || !r.GetInts(&plan.blocks, blocks)) {
    return Bad("truncated tokens or blocks");
  }
  if (!r.done()) return Bad("trailing bytes");
  return plan;
}

}  // namespace baton::engine
