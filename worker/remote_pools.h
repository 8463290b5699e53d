// The page pools of other workers as this process reaches them over UCX: an endpoint to
// each peer's UCX worker and its pool's remote key, unpacked once and reused. Over shared
// memory, unpacking maps the peer's pool, and the first put into each page of a new
// mapping faults it in; reused, the mapping is warm (docs/perf/transport.md). An endpoint
// whose peer failed, or a peer that registered another pool, is reconnected on next use;
// requests still holding the old one keep it alive until they end.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "transport/ucx_endpoint.h"
#include "transport/ucx_worker.h"

namespace baton::worker {

struct RemotePool {
  std::shared_ptr<transport::UcxEndpoint> ep;
  std::unique_ptr<transport::RemoteRegion> region;  // declared after ep: destroyed first
  std::string rkey;
  uint64_t base = 0, bytes = 0;
};

class RemotePools {
 public:
  // `ucx` must outlive this. `flush_timeout` bounds the handshake of a new endpoint.
  RemotePools(transport::UcxWorker* ucx, absl::Duration flush_timeout)
      : ucx_(ucx), flush_timeout_(flush_timeout) {}

  // The pool registered at `address` as (rkey, base, bytes); thread-safe.
  absl::StatusOr<std::shared_ptr<RemotePool>> Get(const std::string& address,
                                                  const std::string& rkey, uint64_t base,
                                                  uint64_t bytes);

 private:
  transport::UcxWorker* ucx_;
  absl::Duration flush_timeout_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<RemotePool>> pools_;  // by UCX worker address
};

}  // namespace baton::worker
