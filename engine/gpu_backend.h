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
#include "engine/gpu_kv_mirror.h"
#include "kernels/gpu_ops.h"
#include "kvcache/kv_pool.h"
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
  // Keep a host copy of the KV pages for KV transfers (prefill and decode roles:
  // engine/kv_host_mirror.h), as large as the pages. Its memory comes from
  // `host_mirror_memory` when that is set and returns memory, else it is pinned memory of
  // the device's.
  bool host_mirror = false;
  std::function<absl::StatusOr<void*>(size_t bytes)> host_mirror_memory;
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
  // above), the pool's memory (device memory, owned here), the pages' host copy when one
  // was asked for, and the backend. ResourceExhausted when not one page fits, or the host
  // copy's memory cannot be had.
  absl::Status Configure(EngineOptions* options);

  kernels::GpuOps* ops() { return ops_.get(); }
  model::LlamaGpuForward* forward() { return forward_.get(); }
  int64_t kv_bytes() const { return kv_.bytes(); }
  KvHostMirror* host_mirror() { return mirror_.get(); }

 private:
  GpuEngine() = default;
  absl::Status MakeMirror(int64_t page_bytes, int64_t pages);
  const model::Model* model_ = nullptr;
  GpuEngineOptions options_;
  std::unique_ptr<kernels::GpuOps> ops_;
  std::unique_ptr<model::LlamaGpuForward> forward_;
  kernels::GpuBuffer kv_;
  void* mirror_pinned_ = nullptr;  // the host copy's memory, when it is ours
  std::unique_ptr<GpuKvMirror> mirror_;
};

struct GpuStart {
  bool quiet = false;  // no progress lines
  // For a worker that takes part in KV transfers: GpuEngineOptions' fields of that name.
  bool host_mirror = false;
  std::function<absl::StatusOr<void*>(size_t bytes)> host_mirror_memory;
};

// For --device cuda: opens the GPU's kernels (the plugin: engine/device.h), uploads
// `model`'s weights with a progress line on stderr (none when `start.quiet`), and points
// `options` at the device (GpuEngine::Configure). Null for --device cpu, with `options`
// untouched. The result must outlive the engine made with `options`.
absl::StatusOr<std::unique_ptr<GpuEngine>> StartGpu(const model::Model& model,
                                                    const DeviceOptions& device,
                                                    EngineOptions* options,
                                                    const GpuStart& start = {});

// The Backend over a GpuEngine's forward and the engine's pool (whose pages are the
// GpuEngine's device memory).
class GpuBackend : public Backend {
 public:
  // `mirror` may be null: then a step with a layer hook fails (FailedPrecondition).
  GpuBackend(const model::ModelConfig& config, model::LlamaGpuForward* forward,
             kvcache::KvPool* pool, KvHostMirror* mirror)
      : config_(config), forward_(forward), pool_(pool), mirror_(mirror) {}

  absl::Status Forward(std::span<const SequenceInput> batch, ForwardOutput* out) override;
  // A layer-wise KV push reads pages on the host: after a step with a hook set, the pages
  // of every sequence of the batch, from its first block through the step's last token,
  // go to the host mirror (one copy per run of pages), and then the hook sees every layer
  // land. The push thus starts when the step ends, not layer by layer during it.
  void set_layer_kv_hook(LayerKvHook hook) override { hook_ = std::move(hook); }
  const char* name() const override { return "cuda"; }

 private:
  const model::ModelConfig& config_;
  model::LlamaGpuForward* forward_;
  kvcache::KvPool* pool_;
  KvHostMirror* mirror_;
  LayerKvHook hook_;
};

}  // namespace baton::engine
