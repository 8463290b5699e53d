// One sequence with pages of its own, fed to a ModelRunner step by step (the tests that
// compare the engine with reference outputs).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/model_runner.h"
#include "kvcache/kv_pool.h"

namespace baton::engine::testing {

class Sequence {
 public:
  Sequence(kvcache::KvPool* pool, int64_t capacity) : pool_(pool) {
    const int64_t bs = pool->layout().block_size;
    for (int64_t i = 0; i < (capacity + bs - 1) / bs; ++i) blocks_.push_back(*pool->Allocate());
  }
  ~Sequence() {
    for (int32_t b : blocks_) pool_->Free(b);
  }
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;
  SequenceInput Input(std::span<const int32_t> tokens, LogitsWanted logits) {
    SequenceInput in{tokens, pos_, blocks_, logits};
    pos_ += static_cast<int64_t>(tokens.size());
    return in;
  }

 private:
  kvcache::KvPool* pool_;
  std::vector<int32_t> blocks_;
  int64_t pos_ = 0;
};

}  // namespace baton::engine::testing
