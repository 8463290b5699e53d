#include "dispatch/completion_loops.h"

#include <algorithm>

namespace baton::dispatch {
namespace {

void Run(grpc::CompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) static_cast<LoopTag*>(tag)->Done(ok);
}

}  // namespace

std::unique_ptr<CompletionLoops> CompletionLoops::Create(int threads) {
  std::unique_ptr<CompletionLoops> l(new CompletionLoops());
  for (int i = 0; i < std::max(1, threads); ++i) {
    l->queues_.push_back(std::make_unique<grpc::CompletionQueue>());
  }
  l->Start();
  return l;
}

std::unique_ptr<CompletionLoops> CompletionLoops::AddTo(grpc::ServerBuilder& builder, int threads) {
  std::unique_ptr<CompletionLoops> l(new CompletionLoops());
  for (int i = 0; i < std::max(1, threads); ++i) {
    std::unique_ptr<grpc::ServerCompletionQueue> q = builder.AddCompletionQueue();
    l->server_queues_.push_back(q.get());
    l->queues_.push_back(std::move(q));
  }
  return l;
}

CompletionLoops::~CompletionLoops() { Shutdown(); }

void CompletionLoops::Start() {
  if (!threads_.empty() || shut_down_) return;
  for (auto& q : queues_) threads_.emplace_back(Run, q.get());
}

grpc::CompletionQueue* CompletionLoops::Pick() {
  return queues_[next_.fetch_add(1, std::memory_order_relaxed) % queues_.size()].get();
}

grpc::ServerCompletionQueue* CompletionLoops::server_queue(int i) const {
  return server_queues_.empty() ? nullptr : server_queues_[static_cast<size_t>(i)];
}

void CompletionLoops::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  for (auto& q : queues_) q->Shutdown();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  // A queue must be drained before it goes away; with no thread started, nothing ran.
  for (auto& q : queues_) {
    void* tag = nullptr;
    bool ok = false;
    while (q->Next(&tag, &ok)) {
    }
  }
}

}  // namespace baton::dispatch
