// A TCP proxy in front of one worker's port, for the chaos suite's link faults: it delays
// every byte by a set time, holds every byte (a link that drops all packets: TCP neither
// delivers nor gives up until someone's timeout does), or resets every connection. The
// kernel here has no netem qdisc ("Specified qdisc kind is unknown" inside `unshare -rn`),
// so the faults are made in user space, on the bytes, where they look the same to both ends.
//
//   LinkProxy proxy(worker_port);          // listens on 127.0.0.1:proxy.port()
//   proxy.SetDelay(absl::Milliseconds(300));
//   proxy.SetBlackhole(true);              // later SetBlackhole(false): held bytes flow on
//   proxy.ResetAll();                      // every connection gets an RST, both ways
//
// One thread polls every connection. Thread-safe setters.
#pragma once

#include <atomic>
#include <memory>
#include <thread>

#include "absl/time/time.h"

namespace baton::testing {

class LinkProxy {
 public:
  // Forwards each connection to 127.0.0.1:target_port (a worker restarted on its port is
  // reached again). port() is 0 when the proxy could not listen.
  explicit LinkProxy(int target_port);
  ~LinkProxy();
  LinkProxy(const LinkProxy&) = delete;
  LinkProxy& operator=(const LinkProxy&) = delete;

  int port() const { return port_; }
  void SetDelay(absl::Duration delay) { delay_ns_.store(absl::ToInt64Nanoseconds(delay)); }
  void SetBlackhole(bool on) { blackhole_.store(on); }
  void ResetAll() { reset_.store(true); }

 private:
  struct Pipe;
  void Run();

  const int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int64_t> delay_ns_{0};
  std::atomic<bool> blackhole_{false};
  std::atomic<bool> reset_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace baton::testing
