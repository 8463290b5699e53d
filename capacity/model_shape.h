// A model's shape in plain numbers: what capacity planning needs to know about a model,
// in a form the router holds too (a worker's GetModelInfo carries it) without linking
// model/. model::ShapeOf(config) fills one from a loaded model's config.
#pragma once

#include <cstdint>

namespace baton::capacity {

struct ModelShape {
  int64_t layers = 0;
  int64_t heads = 0;     // query heads
  int64_t kv_heads = 0;  // GQA: heads % kv_heads == 0; MQA: 1
  int64_t head_dim = 0;
  int64_t hidden = 0;
  int64_t intermediate = 0;
  int64_t vocab = 0;
  int64_t context = 0;  // max_position_embeddings
};

}  // namespace baton::capacity
