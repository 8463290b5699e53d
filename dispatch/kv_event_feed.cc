#include "dispatch/kv_event_feed.h"

#include <chrono>
#include <utility>

#include "baton/internal/v1/kv_events.grpc.pb.h"
#include "kvcache/kv_event_proto.h"

namespace baton::dispatch {

namespace pb = ::baton::internal::v1;

struct KvEventFeed::Follower {
  routing::WorkerId id = 0;
  WorkerClient* worker = nullptr;
  std::unique_ptr<pb::KvEvents::Stub> stub;
  std::mutex mu;  // guards ctx against Stop's TryCancel
  grpc::ClientContext* ctx = nullptr;
  std::thread thread;
};

KvEventFeed::KvEventFeed(routing::KvIndex* index, RouterMetrics* metrics)
    : index_(index), metrics_(metrics) {}

KvEventFeed::~KvEventFeed() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& f : followers_) {
    std::lock_guard<std::mutex> lock(f->mu);
    if (f->ctx != nullptr) f->ctx->TryCancel();
  }
  for (auto& f : followers_) f->thread.join();
}

void KvEventFeed::Add(routing::WorkerId id, WorkerClient* worker) {
  auto f = std::make_unique<Follower>();
  f->id = id;
  f->worker = worker;
  f->stub = pb::KvEvents::NewStub(worker->channel());
  Follower* raw = f.get();
  followers_.push_back(std::move(f));
  raw->thread = std::thread([this, raw] { Follow(raw); });
}

bool KvEventFeed::Sleep(absl::Duration d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, absl::ToChronoMilliseconds(d), [this] { return stopping_; });
}

void KvEventFeed::Follow(Follower* f) {
  absl::Duration backoff = absl::Milliseconds(100);
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    const absl::Time started = absl::Now();
    Session(f);
    // Whatever the worker held is unknown now; if it restarted, it holds nothing.
    index_->ForgetWorker(f->id);
    if (metrics_ != nullptr) metrics_->CountKvEventReconnect(f->worker->target());
    // A stream that lived a while starts over quickly; one that keeps failing backs off.
    backoff = absl::Now() - started > absl::Seconds(10) ? absl::Milliseconds(100)
                                                        : std::min(backoff * 2, absl::Seconds(5));
    if (!Sleep(backoff)) return;
  }
}

bool KvEventFeed::Snapshot(Follower* f) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  pb::KvSnapshot wire;
  if (!f->stub->GetSnapshot(&ctx, pb::GetKvSnapshotRequest(), &wire).ok()) return false;
  absl::StatusOr<kvcache::KvSnapshot> snap = kvcache::FromProto(wire);
  if (!snap.ok()) {
    if (metrics_ != nullptr) metrics_->CountKvEventError(f->worker->target());
    return false;
  }
  index_->ApplySnapshot(f->id, *snap);
  if (metrics_ != nullptr) metrics_->CountKvSnapshot(f->worker->target());
  return true;
}

void KvEventFeed::Session(Follower* f) {
  grpc::ClientContext ctx;
  {
    std::lock_guard<std::mutex> lock(f->mu);
    std::lock_guard<std::mutex> stop_lock(mu_);
    if (stopping_) return;
    f->ctx = &ctx;
  }
  // Subscribe first, then snapshot: batches published in between arrive on the stream
  // and are either in the snapshot (stale, skipped) or follow it.
  std::unique_ptr<grpc::ClientReaderInterface<pb::KvEventBatch>> reader =
      f->stub->Subscribe(&ctx, pb::SubscribeKvEventsRequest());
  if (Snapshot(f)) {
    pb::KvEventBatch wire;
    while (reader->Read(&wire)) {
      absl::StatusOr<kvcache::KvEventBatch> batch = kvcache::FromProto(wire);
      if (!batch.ok()) {  // a peer we cannot read: drop what we know and start over
        if (metrics_ != nullptr) metrics_->CountKvEventError(f->worker->target());
        break;
      }
      if (metrics_ != nullptr && batch->published_unix_micros > 0) {
        metrics_->ObserveKvEventLag(
            static_cast<double>(absl::ToUnixMicros(absl::Now()) - batch->published_unix_micros) /
            1e6);
      }
      if (index_->ApplyBatch(f->id, *batch) == routing::KvIndex::Applied::kNeedsSnapshot) {
        if (metrics_ != nullptr) metrics_->CountKvEventGap(f->worker->target());
        if (!Snapshot(f)) break;
      }
    }
  }
  ctx.TryCancel();
  (void)reader->Finish();
  std::lock_guard<std::mutex> lock(f->mu);
  f->ctx = nullptr;
}

}  // namespace baton::dispatch
