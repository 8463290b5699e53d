// The engine on a GPU (--device cuda): the model's forward on the device
// (model/arch/llama_gpu.h) behind the engine's Backend seam, over a KV pool whose pages
// live in device memory. The scheduler, prefix cache and sampler stay on the host and do
// not change; each step's logits come back to the host for the sampler.
//
//   BATON_ASSIGN_OR_RETURN(auto ops, OpenCudaGpuOps(device_id, batch_invariant));
//   BATON_ASSIGN_OR_RETURN(auto gpu, GpuEngine::Create(*loaded.model, std::move(ops), {}));
//   BATON_RETURN_IF_ERROR(gpu->Configure(&engine_options));  // then Engine::Create
//
// The engine must be destroyed before the GpuEngine: its pool's pages are the GpuEngine's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/device.h"
#include "engine/engine.h"
#include "engine/kv_pool.h"
#include "kernels/gpu_ops.h"
#include "model/arch/llama_gpu.h"
#include "model/model.h"

namespace baton::engine {

struct GpuEngineOptions {
  bool use_graphs = true;  // --no-cuda-graphs turns them off
  // When EngineOptions::kv_cache_bytes is 0: this fraction of the device memory still free
  // once the weights and the step's scratch are in place goes to KV pages (vLLM's
  // --gpu-memory-utilization plays the same part). The rest is for cuBLASLt, graphs and
  // the CUDA context's own needs.
  double kv_memory_fraction = 0.9;
  // Called while the weights upload, with bytes done and the total.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

class GpuEngine {
 public:
  // Uploads `model`'s weights (the whole model: one rank) to `ops`'s device and sizes the
  // step's scratch from `engine` (max_batched_tokens, max_running).
  static absl::StatusOr<std::unique_ptr<GpuEngine>> Create(const model::Model& model,
                                                           std::unique_ptr<kernels::GpuOps> ops,
                                                           const EngineOptions& engine,
                                                           const GpuEngineOptions& options);
  ~GpuEngine();

  // Points `options` at this device: the KV budget (kv_cache_bytes, when 0 the fraction
  // above), the pool's memory (device memory, owned here) and the backend.
  // ResourceExhausted when not one page fits.
  absl::Status Configure(EngineOptions* options);

  kernels::GpuOps* ops() { return ops_.get(); }
  model::LlamaGpuForward* forward() { return forward_.get(); }
  int64_t kv_bytes() const { return kv_.bytes(); }

 private:
  GpuEngine() = default;
  const model::Model* model_ = nullptr;
  GpuEngineOptions options_;
  std::unique_ptr<kernels::GpuOps> ops_;
  std::unique_ptr<model::LlamaGpuForward> forward_;
  kernels::GpuBuffer kv_;
};

// For --device cuda: opens the GPU's kernels (the plugin: engine/device.h), uploads
// `model`'s weights with a progress line on stderr (none when `quiet`), and points
// `options` at the device (GpuEngine::Configure). Null for --device cpu, with `options`
// untouched. The result must outlive the engine made with `options`.
absl::StatusOr<std::unique_ptr<GpuEngine>> StartGpu(const model::Model& model,
                                                    const DeviceOptions& device,
                                                    EngineOptions* options, bool quiet = false);

// The Backend over a GpuEngine's forward and the engine's pool (whose pages are the
// GpuEngine's device memory).
class GpuBackend : public Backend {
 public:
  GpuBackend(const model::ModelConfig& config, model::LlamaGpuForward* forward, KvPool* pool)
      : config_(config), forward_(forward), pool_(pool) {}

  absl::Status Forward(std::span<const SequenceInput> batch, ForwardOutput* out) override;
  // A layer-wise KV push reads pages on the host; GPU pages are not there yet (the staged
  // transfer path is not built), so a step with a hook set fails with FailedPrecondition.
  void set_layer_kv_hook(LayerKvHook hook) override { hook_ = std::move(hook); }
  const char* name() const override { return "cuda"; }

 private:
  const model::ModelConfig& config_;
  model::LlamaGpuForward* forward_;
  KvPool* pool_;
  LayerKvHook hook_;
};

}  // namespace baton::engine
