// The chaos suite (issue 25 §5): steady load on a split cluster of 2 prefill and 2 decode
// workers behind one router, while faults strike at random times: `kill -9` of a worker
// (restarted on its port, as a supervisor would), SIGSTOP for 1-3 s then SIGCONT, and link
// faults on a worker's gRPC link (every byte delayed 0.1-0.6 s, or held for 1-3 s as by a
// link that drops every packet, or every connection reset), made by a proxy in front of
// each worker's port (link_proxy.h: this kernel has no netem). It reports requests ok and
// failed, the longest stall a client saw, the time from each fault's end to the next
// success, and the pages and leases left held once the load stops, which must be none.
//
// BATON_CHAOS_SECONDS sets the length (20 s by default, as CI runs it; longer runs by hand),
// BATON_CHAOS_SEED the faults' seed (printed, so that a failing run can be replayed).
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/chaos/link_proxy.h"
#include "tests/integration/router_proc.h"
#include "tests/integration/worker_proc.h"

namespace baton::testing {
namespace {

using Clock = std::chrono::steady_clock;
namespace ipb = ::baton::internal::v1;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double EnvNumber(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atof(v) : fallback;
}

// A role worker that can be killed and started again on the same port.
struct ChaosWorker {
  std::string bin;
  int port = 0;
  std::unique_ptr<ChildProcess> process;
  std::unique_ptr<ipb::Worker::Stub> stub;
  // What the router and the prefill workers dial: the worker's port through a proxy that
  // makes the link faults. The test itself reads stats from the port directly.
  std::unique_ptr<LinkProxy> link;

  bool Start() {
    process = std::make_unique<ChildProcess>(std::vector<std::string>{
        bin, "--model", std::string(BATON_SOURCE_DIR) + "/models/baton-tiny", "--port",
        std::to_string(port), "--threads", "1", "--kv-cache-memory", "16MiB", "--ucx-tls", "tcp",
        // A reservation whose holder is gone (a prefill worker killed mid-transfer, a
        // decode worker stopped while its reservation was made) is freed when its lease
        // ends: short here, so that "nothing left held" is checked within the run.
        "--kv-lease-seconds", "3"});
    std::smatch m;
    const std::string line = process->ReadLine();
    if (!std::regex_search(line, m, std::regex(R"(on 127\.0\.0\.1:(\d+))"))) {
      ADD_FAILURE() << bin << " did not start: '" << line << "'";
      return false;
    }
    port = std::stoi(m[1].str());
    stub = ipb::Worker::NewStub(grpc::CreateChannel(target(), grpc::InsecureChannelCredentials()));
    if (link == nullptr) link = std::make_unique<LinkProxy>(port);
    return link->port() != 0;
  }
  std::string target() const { return "127.0.0.1:" + std::to_string(port); }
  std::string link_target() const { return "127.0.0.1:" + std::to_string(link->port()); }
  void Kill() {
    process->Signal(SIGKILL);
    process->Wait();
  }
  ipb::GetStatsResponse Stats() const {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    ipb::GetStatsResponse out;
    (void)stub->GetStats(&ctx, {}, &out);
    return out;
  }
};

struct Outcome {
  Clock::time_point start, end;
  bool ok = false;
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string message;
  double longest_gap = 0;  // seconds without a message, up to the answer's end
};

// One greedy request through the router, timing the gaps between its messages.
Outcome SendOne(Router& router, int n) {
  static const char* kPrompts[] = {"Once upon a time", "The little dog ran to the park and",
                                   "Lily had a red ball. She"};
  pb::GenerateRequest req;
  req.set_text(std::string(kPrompts[n % 3]) + " " + std::to_string(n % 17));
  req.mutable_sampling()->set_temperature(0);
  req.mutable_stop()->set_max_tokens(24);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  Outcome o;
  o.start = Clock::now();
  auto last = o.start;
  auto reader = router.stub->Generate(&ctx, req);
  pb::GenerateResponse m;
  while (reader->Read(&m)) {
    const auto now = Clock::now();
    o.longest_gap = std::max(o.longest_gap, Seconds(now - last));
    last = now;
  }
  const grpc::Status status = reader->Finish();
  o.end = Clock::now();
  o.longest_gap = std::max(o.longest_gap, Seconds(o.end - last));
  o.ok = status.ok();
  o.code = status.error_code();
  o.message = status.error_message().substr(0, 100);
  return o;
}

TEST(Chaos, KillsStopsAndLinkFaultsUnderLoadLeakNothingAndTheClusterRecovers) {
  const double run_seconds = EnvNumber("BATON_CHAOS_SECONDS", 20);
  const auto seed = static_cast<uint32_t>(EnvNumber("BATON_CHAOS_SEED", std::random_device{}()));
  std::printf("chaos: %.0f s, seed %u (BATON_CHAOS_SEED to replay)\n", run_seconds, seed);

  std::vector<ChaosWorker> workers(4);
  for (int i = 0; i < 4; ++i) {
    workers[i].bin = i < 2 ? BATON_PREFILL_BIN : BATON_DECODE_BIN;
    ASSERT_TRUE(workers[i].Start());
  }
  Router router({"--prefill-worker", workers[0].link_target() + "," + workers[1].link_target(),
                 "--decode-worker", workers[2].link_target() + "," + workers[3].link_target()});
  ASSERT_NE(router.stub, nullptr);
  ASSERT_TRUE(SendOne(router, 0).ok) << "the cluster does not serve before any fault";

  std::mutex mu;
  std::vector<Outcome> outcomes;
  std::vector<Clock::time_point> fault_ends;
  int kills = 0, stops = 0, delays = 0, holes = 0, resets = 0;
  std::atomic<bool> loading{true};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      for (int n = c; loading.load(); n += 4) {
        Outcome o = SendOne(router, n);
        {
          std::lock_guard<std::mutex> lock(mu);
          outcomes.push_back(o);
        }
        // A client that backs off after a failure, as a real one would: the counts then
        // say how long requests failed, not how fast a loop can fail.
        if (!o.ok) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }

  std::mt19937 rng(seed);
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<>(lo, hi)(rng);
  };
  auto sleep_s = [](double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); };
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(run_seconds));
  while (Clock::now() + std::chrono::seconds(4) < end) {
    sleep_s(uniform(1.0, 2.5));
    const int which = std::uniform_int_distribution<>(0, 3)(rng);
    ChaosWorker& w = workers[which];
    const double kind = uniform(0, 1);
    const double at = run_seconds - Seconds(end - Clock::now());
    const char* role = which < 2 ? "prefill" : "decode";
    if (kind < 0.3) {
      std::printf("chaos: %.1f s: kill -9 %s worker %d\n", at, role, which % 2);
      w.Kill();
      ++kills;
      sleep_s(uniform(0.2, 1.0));
      ASSERT_TRUE(w.Start()) << "restarting " << w.bin << " on port " << w.port;
    } else if (kind < 0.6) {
      const double s = uniform(1.0, 3.0);
      std::printf("chaos: %.1f s: SIGSTOP %s worker %d for %.1f s\n", at, role, which % 2, s);
      w.process->Signal(SIGSTOP);
      ++stops;
      sleep_s(s);
      w.process->Signal(SIGCONT);
    } else if (kind < 0.75) {
      const double d = uniform(0.1, 0.6), s = uniform(1.0, 3.0);
      std::printf("chaos: %.1f s: %s worker %d's link delayed %.0f ms for %.1f s\n", at, role,
                  which % 2, d * 1e3, s);
      w.link->SetDelay(absl::Seconds(d));
      ++delays;
      sleep_s(s);
      w.link->SetDelay(absl::ZeroDuration());
    } else if (kind < 0.9) {
      const double s = uniform(1.0, 3.0);
      std::printf("chaos: %.1f s: %s worker %d's link drops everything for %.1f s\n", at, role,
                  which % 2, s);
      w.link->SetBlackhole(true);
      ++holes;
      sleep_s(s);
      w.link->SetBlackhole(false);
    } else {
      std::printf("chaos: %.1f s: %s worker %d's connections reset\n", at, role, which % 2);
      w.link->ResetAll();
      ++resets;
    }
    std::lock_guard<std::mutex> lock(mu);
    fault_ends.push_back(Clock::now());
  }
  sleep_s(std::max(0.0, Seconds(end - Clock::now())));
  loading.store(false);
  for (auto& t : clients) t.join();

  // What the faults cost.
  int ok = 0, failed = 0, hung = 0;
  double longest_stall = 0;
  std::map<std::string, int> failures;  // by code and message, to say what the faults cost
  for (const Outcome& o : outcomes) {
    (o.ok ? ok : failed) += 1;
    if (!o.ok) ++failures[std::to_string(o.code) + " " + o.message];
    if (o.code == grpc::StatusCode::DEADLINE_EXCEEDED) ++hung;
    longest_stall = std::max(longest_stall, o.longest_gap);
  }
  double worst_recovery = 0;
  for (const auto& fault_end : fault_ends) {
    double recovery = -1;
    for (const Outcome& o : outcomes) {
      if (o.ok && o.start >= fault_end) {
        const double r = Seconds(o.end - fault_end);
        if (recovery < 0 || r < recovery) recovery = r;
      }
    }
    if (recovery >= 0) worst_recovery = std::max(worst_recovery, recovery);
  }

  // Nothing left held anywhere once the load has stopped.
  int64_t pages = 0, leases = 0;
  for (ChaosWorker& w : workers) {
    ipb::GetStatsResponse s = w.Stats();
    for (auto give_up = Clock::now() + std::chrono::seconds(15);
         !NoPagesHeld(s) && Clock::now() < give_up; s = w.Stats()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    pages += s.pages_used();
    leases += s.kv_reservations();
    if (!NoPagesHeld(s)) {
      std::printf("chaos: %s still holds %lld pages, %lld reservations, %lld running\n",
                  w.target().c_str(), static_cast<long long>(s.pages_used()),
                  static_cast<long long>(s.kv_reservations()), static_cast<long long>(s.running()));
    }
  }
  // And the cluster serves again.
  int after_ok = 0;
  for (int n = 0; n < 8; ++n) after_ok += SendOne(router, n).ok ? 1 : 0;

  std::printf(
      "chaos: %d kills, %d stops, %d delayed links, %d dropped links, %d resets; requests %d "
      "ok, %d failed (%d hung); longest stall %.2f s; worst recovery %.2f s; leaked pages "
      "%lld, leases %lld; after: %d/8 ok\n",
      kills, stops, delays, holes, resets, ok, failed, hung, longest_stall, worst_recovery,
      static_cast<long long>(pages), static_cast<long long>(leases), after_ok);
  for (const auto& [what, count] : failures)
    std::printf("chaos:   %6d x %s\n", count, what.c_str());
  EXPECT_GT(ok, 0);
  EXPECT_EQ(hung, 0) << "a request waited out its 30 s deadline";
  EXPECT_EQ(pages, 0) << "pages left held";
  EXPECT_EQ(leases, 0) << "reservations left held";
  EXPECT_EQ(after_ok, 8) << "the cluster did not recover";
  // A stopped worker is noticed within about 2 s (keepalive); a stall is at most the
  // longest stop plus that.
  EXPECT_LT(longest_stall, 10.0);
}

}  // namespace
}  // namespace baton::testing
