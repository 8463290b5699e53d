// The router's gRPC threads: each owns one completion queue and runs whatever completes
// on it. Both front doors put their calls here: a baton.v1 Generate (both legs: the
// client's call and the worker's stream) and an HTTP request's worker streams. A token
// is then read, decoded and written by the one thread that polled it. No thread of
// gRPC's own (the callback API's "nexting" threads, a default health service) polls in
// the router, so gRPC does not hand a read from its poller to the queue's owner:
// docs/perf/frontdoor.md measured 4.5 thread switches per token with those threads and
// 1.3 without, at 25-35 % less CPU.
//
//   auto loops = CompletionLoops::Create(1);        // or AddTo(builder, n) for the server
//   reader = stub->PrepareAsyncGenerate(&ctx, req, loops->Pick());
//   reader->StartCall(&start_tag);                  // start_tag.Done(ok) runs on the loop
//   ...
//   loops->Shutdown();  // once no call can start another operation on the queues
#pragma once

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "grpcpp/completion_queue.h"
#include "grpcpp/server_builder.h"

namespace baton::dispatch {

// What a loop calls when an operation completes: the tag passed to gRPC.
class LoopTag {
 public:
  virtual void Done(bool ok) = 0;

 protected:
  ~LoopTag() = default;
};

// A tag that calls a member function: one per kind of step of an object.
template <class T>
class MemberTag final : public LoopTag {
 public:
  MemberTag(T* object, void (T::*on_done)(bool)) : object_(object), on_done_(on_done) {}
  void Done(bool ok) override { (object_->*on_done_)(ok); }

 private:
  T* object_;
  void (T::*on_done_)(bool);
};

class CompletionLoops {
 public:
  // Plain queues, already running: for a router without the gRPC API, and for tests.
  static std::unique_ptr<CompletionLoops> Create(int threads);
  // Server queues (a server's async calls need them; client calls may use them too),
  // added to `builder`. Start() once the server is built.
  static std::unique_ptr<CompletionLoops> AddTo(grpc::ServerBuilder& builder, int threads);
  ~CompletionLoops();
  CompletionLoops(const CompletionLoops&) = delete;
  CompletionLoops& operator=(const CompletionLoops&) = delete;

  void Start();
  int size() const { return static_cast<int>(queues_.size()); }
  // The queue for a new call, in turn.
  grpc::CompletionQueue* Pick();
  // Null for plain queues.
  grpc::ServerCompletionQueue* server_queue(int i) const;

  // Shuts the queues down, joins the threads and drains what is left. The caller makes
  // sure that no call can start another operation on them (gRPC forbids it).
  void Shutdown();

 private:
  CompletionLoops() = default;

  std::vector<std::unique_ptr<grpc::CompletionQueue>> queues_;
  std::vector<grpc::ServerCompletionQueue*> server_queues_;  // same objects, when server ones
  std::vector<std::thread> threads_;
  std::atomic<unsigned> next_{0};
  bool shut_down_ = false;
};

}  // namespace baton::dispatch
