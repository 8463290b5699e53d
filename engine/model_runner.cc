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

KvLayout KvLayoutFor(const model::ModelConfig& config, int64_t block_size) {
  return KvLayout{config.num_layers, config.num_kv_heads, config.head_dim, block_size};
}

KvLayout KvLayoutFor(const model::Shard& shard, const model::ModelConfig& config,
                     int64_t block_size) {
  return KvLayout{shard.num_layers(), shard.num_kv_heads, config.head_dim, block_size};
}

model::KvPages KvPagesOf(KvPool* pool) {
  return model::KvPages{pool->block_data(0), pool->num_blocks(), pool->layout().floats_per_block(),
                        pool->layer_stride(), pool->layout().block_size};
}

ModelRunner::ModelRunner(const model::Model& model, KvPool* pool, ThreadPool* threads)
    : pool_(pool), forward_(model, WholeModel(model.config()), threads, nullptr) {
  const KvLayout want = KvLayoutFor(model.config(), pool->layout().block_size);
  const KvLayout& have = pool->layout();
  BATON_CHECK(have.num_layers == want.num_layers && have.num_kv_heads == want.num_kv_heads &&
              have.head_dim == want.head_dim);
}

absl::Status ModelRunner::Forward(std::span<const SequenceInput> batch, ForwardOutput* out) {
  BATON_RETURN_IF_ERROR(forward_.Validate(batch, pool_->num_blocks(), pool_->layout().block_size));
  return forward_.Forward(batch, KvPagesOf(pool_), &hidden_, out);
}

}  // namespace baton::engine
