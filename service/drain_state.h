// What a server in its drain (SIGTERM) tells the code that answers its calls. A drain has
// two phases: from Begin, new work is turned away (HTTP 503 with Retry-After, gRPC
// UNAVAILABLE, readiness NOT_SERVING) while work in flight goes on; from Expire, once
// --shutdown-grace-seconds have passed, work still in flight is ended with an error that
// says so, never cut silently (docs/operations.md, "Drain").
//
//   DrainState drain;        // one per server, outlives its handlers
//   drain.Begin();           // on SIGTERM
//   ... wait for in-flight work, up to the grace ...
//   drain.Expire();          // then end what is left
#pragma once

#include <atomic>

namespace baton::service {

class DrainState {
 public:
  void Begin() { draining_.store(true); }
  void Expire() {
    draining_.store(true);
    expired_.store(true);
  }
  bool draining() const { return draining_.load(); }
  bool expired() const { return expired_.load(); }

 private:
  std::atomic<bool> draining_{false};
  std::atomic<bool> expired_{false};
};

}  // namespace baton::service
