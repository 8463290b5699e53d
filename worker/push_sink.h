// What the prefill side's KV sinks have in common (engine/kv_sink.h): the sender reads the
// push's result once the request ended, and watches its health while it computes.
//   UcxKvSink   one rank into one rank of the same layout (worker/ucx_kv_sink.h)
//   SliceKvSink one rank into a receiver's ranks of other slices (worker/slice_kv_sink.h)
//   GroupKvSink a group's ranks, each its own slice (worker/slice_kv_sink.h)
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kvcache/kv_checksum.h"
#include "kvcache/kv_sink.h"
#include "transport/transfer_ticket.h"

namespace baton::worker {

struct KvPushResult {
  uint64_t bytes_sent = 0;       // put, including blocks sent twice after a preemption
  kvcache::KvChecksum checksum;  // plain transfers: over the whole of what the receiver holds
  std::vector<transport::SliceSum> slices;  // sliced transfers: per pair of ranks
  int64_t puts = 0;
  double transfer_seconds = 0;  // first put posted to the last flush done
  double exposed_seconds = 0;   // waiting in Drain, summed over the steps: not overlapped
  bool complete = false;        // Drain saw the prompt complete
};

class PushSink : public kvcache::KvSink {
 public:
  // Read after the request ended.
  virtual const KvPushResult& result() const = 0;
  // The first put error, or a peer's failure; OK while all is well. Callable from a
  // watching thread while the request computes.
  virtual absl::Status health() const = 0;
  // Whether health() sees a receiver that died; where it cannot (shared memory: puts into
  // a dead peer's mapped pool still succeed), the sender polls the receiver instead.
  virtual bool detects_peer_failure() const { return false; }
};

}  // namespace baton::worker
