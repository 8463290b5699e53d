// The transfer contract's page layout (transport/transfer_ticket.h) of an engine's KV
// pool: what this worker writes or expects to receive.
#pragma once

#include "engine/kv_pool.h"
#include "transport/transfer_ticket.h"

namespace baton::worker {

inline transport::PageLayout PageLayoutOf(const engine::KvLayout& kv) {
  transport::PageLayout out;
  out.num_layers = kv.num_layers;
  out.num_kv_heads = kv.num_kv_heads;
  out.head_dim = kv.head_dim;
  out.block_size = kv.block_size;
  out.dtype = "f32";  // the CPU pool's element type (engine/kv_pool.h)
  out.tp_rank = 0;
  out.tp_size = 1;
  out.page_bytes = kv.bytes_per_block();
  return out;
}

}  // namespace baton::worker
