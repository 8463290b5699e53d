// The seam between the engine and the hardware that runs the model's forward: the CPU
// backend (one rank: ModelRunner), a worker group (parallel/group_backend.h), and, later,
// CUDA. The engine's scheduler, prefix cache, sampler and KV transfers sit above it and
// do not change with it.
#pragma once

#include <functional>
#include <span>

#include "absl/status/status.h"
#include "model/forward_batch.h"

namespace baton::engine {

using model::ForwardOutput;
using model::LogitsWanted;
using model::SequenceInput;

class Backend {
 public:
  virtual ~Backend() = default;

  // Runs one step's forward over the batch and returns the logits it asks for.
  // InvalidArgument for a bad batch (token ids, positions, block tables); Unavailable or
  // DeadlineExceeded when a group's rank is gone: the backend is then broken for good.
  virtual absl::Status Forward(std::span<const SequenceInput> batch, ForwardOutput* out) = 0;

  // Called on the forward's thread as soon as layer `layer`'s K/V for every token of the
  // batch is in this process's pages, before the next layer runs; a layer-wise push starts
  // sending them from here while the rest of the forward computes. It may read those
  // pages, but must not write any page or block for long: the forward waits for it.
  using LayerKvHook = std::function<void(int64_t layer, std::span<const SequenceInput> batch)>;
  virtual void set_layer_kv_hook(LayerKvHook hook) = 0;

  // For logs and metrics: "cpu", "cpu tp=2 pp=1".
  virtual const char* name() const = 0;
};

}  // namespace baton::engine
