#include "engine/model_runner.h"

#include "common/check.h"
#include "common/status.h"

namespace baton::engine {
namespace {

model::Shard WholeModel(const model::ModelConfig& config) {
  absl::StatusOr<model::Shard> shard = model::PlanShard(config, model::RankPlacement{});
  BATON_CHECK(shard.ok());
  return *shard;
}

}  // namespace

kvcache::PageLayout PageLayoutFor(const model::ModelConfig& config, int64_t block_size,
                                  const std::string& dtype) {
  kvcache::PageLayout out;
  out.num_layers = config.num_layers;
  out.num_kv_heads = config.num_kv_heads;
  out.head_dim = config.head_dim;
  out.block_size = block_size;
  out.dtype = dtype;
  return out;
}

kvcache::PageLayout PageLayoutFor(const model::Shard& shard, const model::ModelConfig& config,
                                  int64_t block_size, const std::string& dtype) {
  kvcache::PageLayout out = PageLayoutFor(config, block_size, dtype);
  out.num_layers = shard.num_layers();
  out.num_kv_heads = shard.num_kv_heads;
  out.first_layer = shard.layer_begin;
  out.first_kv_head = shard.kv_head_begin;
  out.tp_rank = shard.at.tp_rank;
  out.tp_size = shard.at.tp_size;
  out.pp_rank = shard.at.pp_rank;
  out.pp_size = shard.at.pp_size;
  return out;
}

model::KvPages KvPagesOf(kvcache::KvPool* pool) {
  const kvcache::PageLayout& l = pool->layout();
  // The pool took only the dtypes CheckKvCacheDtype allows.
  BATON_CHECK(l.dtype == "bf16" || l.dtype == "f32");
  return model::KvPages{.data = pool->block_data(0),
                        .dtype = l.dtype == "bf16" ? cpu::KvDtype::kBf16 : cpu::KvDtype::kF32,
                        .num_pages = pool->num_blocks(),
                        .page_elements = l.elements_per_block(),
                        .layer_elements = l.layer_elements(),
                        .head_stride = l.head_stride(),
                        .rows_elements = l.rows_elements(),
                        .block_size = l.block_size};
}

ModelRunner::ModelRunner(const model::Model& model, kvcache::KvPool* pool, ThreadPool* threads)
    : pool_(pool), forward_(model, WholeModel(model.config()), threads, nullptr) {
  const kvcache::PageLayout& have = pool->layout();
  const kvcache::PageLayout want = PageLayoutFor(model.config(), have.block_size, have.dtype);
  BATON_CHECK(have.num_layers == want.num_layers && have.num_kv_heads == want.num_kv_heads &&
              have.head_dim == want.head_dim);
}

absl::Status ModelRunner::Forward(std::span<const SequenceInput> batch, ForwardOutput* out) {
  BATON_RETURN_IF_ERROR(forward_.Validate(batch, pool_->num_blocks(), pool_->layout().block_size));
  return forward_.Forward(batch, KvPagesOf(pool_), &hidden_, out);
}

}  // namespace baton::engine
