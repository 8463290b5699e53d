// Keeps the router's KvIndex in step with every worker's KV event stream
// (proto/baton/internal/v1/kv_events.proto): one thread per worker subscribes, takes a
// snapshot, applies batches in order, and takes a new snapshot on a gap or a new epoch.
// When a stream breaks (the worker died or restarted) the worker's entries are dropped
// and the thread reconnects with backoff.
//
//   KvEventFeed feed(&index, metrics);
//   feed.Add(0, &worker_client);   // starts following
//   ...                            // ~KvEventFeed stops every thread
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "dispatch/router_metrics.h"
#include "dispatch/worker_client.h"
#include "grpcpp/grpcpp.h"
#include "routing/kv_index.h"

namespace baton::dispatch {

class KvEventFeed {
 public:
  // `metrics` may be null; both must outlive the feed.
  KvEventFeed(routing::KvIndex* index, RouterMetrics* metrics);
  ~KvEventFeed();

  void Add(routing::WorkerId id, WorkerClient* worker);

 private:
  struct Follower;
  void Follow(Follower* f);
  // One stream's life: subscribe, snapshot, apply. Returns when it breaks or on Stop.
  void Session(Follower* f);
  bool Snapshot(Follower* f);
  bool Sleep(absl::Duration d);  // false when stopping

  routing::KvIndex* index_;
  RouterMetrics* metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<std::unique_ptr<Follower>> followers_;
};

}  // namespace baton::dispatch
