#include "engine/gpu_backend.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/strings.h"
#include "engine/model_runner.h"
#include "model/forward_batch.h"

namespace baton::engine {

absl::StatusOr<std::unique_ptr<GpuEngine>> GpuEngine::Create(const model::Model& model,
                                                             std::unique_ptr<kernels::GpuOps> ops,
                                                             const EngineOptions& engine,
                                                             const GpuEngineOptions& options) {
  if (!(options.kv_memory_fraction > 0 && options.kv_memory_fraction <= 0.98)) {
    return absl::InvalidArgumentError(StrCat("the GPU's KV memory fraction is ",
                                             options.kv_memory_fraction,
                                             "; it must be in (0, 0.98]"));
  }
  std::unique_ptr<GpuEngine> g(new GpuEngine());
  g->model_ = &model;
  g->options_ = options;
  g->ops_ = std::move(ops);
  model::LlamaGpuOptions fo;
  fo.max_tokens = engine.max_batched_tokens;
  fo.max_seqs = std::min(engine.max_running, engine.max_batched_tokens);
  fo.use_graphs = options.use_graphs;
  fo.progress = options.progress;
  BATON_ASSIGN_OR_RETURN(model::Shard whole,
                         model::PlanShard(model.config(), model::RankPlacement{}));
  BATON_ASSIGN_OR_RETURN(g->forward_,
                         model::LlamaGpuForward::Create(model, whole, g->ops_.get(), nullptr, fo));
  return g;
}

GpuEngine::~GpuEngine() {
  forward_.reset();  // its graphs and scratch before the KV pages and the device
  mirror_.reset();
  if (mirror_pinned_ != nullptr) ops_->FreeHost(mirror_pinned_);
  kv_ = kernels::GpuBuffer();
}

absl::Status GpuEngine::MakeMirror(int64_t page_bytes, int64_t pages) {
  const size_t bytes = static_cast<size_t>(page_bytes * pages);
  void* host = nullptr;
  if (options_.host_mirror_memory) {
    BATON_ASSIGN_OR_RETURN(host, options_.host_mirror_memory(bytes));
  }
  if (host == nullptr) {
    absl::StatusOr<void*> pinned = ops_->MallocHost(static_cast<int64_t>(bytes));
    if (!pinned.ok()) {
      return absl::ResourceExhaustedError(
          StrCat("cannot pin ", bytes,
                 " bytes of host memory for the host copy of the GPU's KV "
                 "pages (",
                 pinned.status().message(),
                 "); a prefill or decode worker needs one as large as its KV cache: give it "
                 "less with --kv-cache-memory"));
    }
    host = mirror_pinned_ = *pinned;
  }
  mirror_ = std::make_unique<GpuKvMirror>(ops_.get(), static_cast<std::byte*>(kv_.get()),
                                          static_cast<std::byte*>(host), page_bytes, pages);
  return absl::OkStatus();
}

absl::Status GpuEngine::Configure(EngineOptions* options) {
  const kvcache::PageLayout layout =
      PageLayoutFor(model_->config(), options->block_size, options->kv_cache_dtype);
  int64_t bytes = options->kv_cache_bytes;
  if (bytes <= 0) {
    BATON_ASSIGN_OR_RETURN(const int64_t free, ops_->FreeMemoryBytes());
    bytes = static_cast<int64_t>(options_.kv_memory_fraction * static_cast<double>(free));
  }
  const int64_t pages = bytes / layout.page_bytes();
  if (pages < 1) {
    return absl::ResourceExhaustedError(
        StrCat("the GPU has room for ", bytes, " bytes of KV cache, less than one page of ",
               options->block_size, " tokens (", layout.page_bytes(),
               " bytes for this model); free device memory or use a smaller model"));
  }
  kv_ = kernels::GpuBuffer();
  BATON_ASSIGN_OR_RETURN(kv_,
                         kernels::GpuBuffer::Allocate(ops_.get(), pages * layout.page_bytes()));
  options->kv_cache_bytes = pages * layout.page_bytes();
  mirror_.reset();
  if (mirror_pinned_ != nullptr) ops_->FreeHost(mirror_pinned_);
  mirror_pinned_ = nullptr;
  if (options_.host_mirror) BATON_RETURN_IF_ERROR(MakeMirror(layout.page_bytes(), pages));
  options->kv_host_mirror = mirror_.get();
  options->kv_pool_memory = [this](size_t want) -> absl::StatusOr<void*> {
    if (static_cast<int64_t>(want) > kv_.bytes()) {
      return absl::InternalError(StrCat("the engine asks for ", want, " bytes of KV pages; ",
                                        kv_.bytes(), " were set aside on the GPU"));
    }
    return kv_.get();
  };
  options->backend = [this](kvcache::KvPool* pool,
                            ThreadPool* /*threads*/) -> absl::StatusOr<std::unique_ptr<Backend>> {
    BATON_RETURN_IF_ERROR(forward_->BindKv(KvPagesOf(pool)));
    return std::unique_ptr<Backend>(
        std::make_unique<GpuBackend>(model_->config(), forward_.get(), pool, mirror_.get()));
  };
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GpuEngine>> StartGpu(const model::Model& model,
                                                    const DeviceOptions& device,
                                                    EngineOptions* options, const GpuStart& start) {
  if (device.device != "cuda") return std::unique_ptr<GpuEngine>();
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<kernels::GpuOps> ops,
                         OpenGpuOps(device, device.batch_invariant));
  const std::string name = ops->name();
  GpuEngineOptions g;
  g.use_graphs = !device.enforce_eager;
  g.kv_memory_fraction = device.gpu_memory_utilization;
  g.host_mirror = start.host_mirror;
  g.host_mirror_memory = start.host_mirror_memory;
  const auto began = std::chrono::steady_clock::now();
  if (!start.quiet) {
    g.progress = [name, last = -1](uint64_t done, uint64_t total) mutable {
      const int percent = total == 0 ? 100 : static_cast<int>(100 * done / total);
      if (percent == last) return;
      last = percent;
      std::fprintf(stderr, "\rbaton: uploading weights to %s: %.2f of %.2f GB (%d%%)", name.c_str(),
                   static_cast<double>(done) / 1e9, static_cast<double>(total) / 1e9, percent);
      std::fflush(stderr);
    };
  }
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<GpuEngine> gpu,
                         GpuEngine::Create(model, std::move(ops), *options, g));
  BATON_RETURN_IF_ERROR(gpu->Configure(options));
  if (!start.quiet) {
    std::fprintf(
        stderr, "\nbaton: %s ready in %.1f s: %.2f GB of weights, %.2f GB of KV pages%s%s\n",
        name.c_str(),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count(),
        static_cast<double>(gpu->forward()->weights().bytes) / 1e9,
        static_cast<double>(gpu->kv_bytes()) / 1e9, device.enforce_eager ? ", no CUDA graphs" : "",
        device.batch_invariant ? ", batch-invariant" : "");
  }
  return gpu;
}

absl::Status GpuBackend::Forward(std::span<const SequenceInput> batch, ForwardOutput* out) {
  if (hook_ && mirror_ == nullptr) {
    return absl::FailedPreconditionError(
        "this GPU engine keeps no host copy of its KV pages, which a KV push reads; start the "
        "worker with --role prefill (or decode) to have one");
  }
  const int64_t block_size = pool_->layout().block_size;
  BATON_RETURN_IF_ERROR(model::ValidateBatch(config_, batch, pool_->num_blocks(), block_size));
  BATON_RETURN_IF_ERROR(forward_->Forward(batch, out));
  if (!hook_) return absl::OkStatus();
  // The sinks push from the host copy: every block of the prompt so far, those the prefix
  // cache served included (a sink pushes them too), goes there before any layer is
  // announced. Blocks copied at an earlier chunk are copied again: simple, and a prompt in
  // one chunk (the common case) copies each page once.
  std::vector<int32_t> pages;
  for (const SequenceInput& s : batch) {
    const int64_t end = s.start_pos + static_cast<int64_t>(s.tokens.size());
    const int64_t blocks = (end + block_size - 1) / block_size;
    pages.insert(pages.end(), s.block_table.begin(), s.block_table.begin() + blocks);
  }
  BATON_RETURN_IF_ERROR(mirror_->ToHost(pages));
  for (int64_t layer = 0; layer < config_.num_layers; ++layer) hook_(layer, batch);
  return absl::OkStatus();
}

}  // namespace baton::engine
