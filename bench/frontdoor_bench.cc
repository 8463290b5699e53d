// The front door's own cost (docs/perf/frontdoor.md): a stub worker that emits tokens
// without computing them, the real router (router::RouterServer) in front of it, and
// clients over HTTP SSE and baton.v1 gRPC. By default the stub and the router each run in
// a process of their own, as they are deployed, and the clients in this one; the stub
// writes when it sent each event into shared memory (StampTable), and the host's steady
// clock times both ends. --layout single runs all three in one process.
//
//   overhead: the stub writes one token every --interval-ms; per event, added latency =
//             client read time - stub write time, for the router paths and for a client
//             calling the stub directly (the baseline: router share = path - direct).
//   ceiling:  the stub writes as fast as gRPC takes; content events/s read by clients,
//             against the direct path measured in the same run.
//
//   frontdoor_bench --streams 1,64 --mode both --json out.json
//
// Every event is checked (count, order, token, text, final event); any loss or error
// makes the exit status 1.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <latch>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/time/time.h"
#include "bench/frontdoor_clients.h"
#include "bench/frontdoor_loop_clients.h"
#include "bench/frontdoor_stamps.h"
#include "bench/frontdoor_stub.h"
#include "common/child_process.h"
#include "common/install_paths.h"
#include "common/status.h"
#include "common/stop_signals.h"
#include "common/strings.h"
#include "nlohmann/json.hpp"
#include "router/router_server.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/loader.h"

namespace baton::bench {
namespace {

struct Flags {
  std::vector<int> streams = {1, 64};
  std::vector<int> ceiling_streams = {1, 16, 64};
  int tokens = 128;
  int requests = 1;  // after a warm-up request on the same connection
  // 50 tokens/s per stream, a usual decode speed. At 2 ms, 64 streams offer 32k events/s,
  // more than this path sustains on 2 cores: the figure would be queueing, not overhead.
  double interval_ms = 20.0;
  double ceiling_seconds = 1.5;
  std::string mode = "both";
  std::string model_dir = DefaultModelPath();  // the bundled model (common/install_paths.h)
  std::string json;
  int target_streams = 64;
  double target_p99_us = 1000;
  bool require_target = false;
  bool http_quickack = false;
  std::vector<std::string> paths = {"direct", "http", "grpc"};
  bool aligned = false;
  int rounds = 1;  // overhead phases repeated, so that the target uses a median
  int grpc_threads = router::RouterOptions().grpc_threads;
  std::string layout = "processes";
  std::string client_poll_strategy;  // empty: gRPC's default (epoll1)
  std::string clients = "loop";      // or "threads": one blocking client per stream
  // A child's part (--layout processes), set by the parent process:
  std::string role;  // "stub" or "router"
  int ready_fd = -1;
  int stamps_fd = -1;
  std::string worker;  // the router's worker address
};

struct LatencyStats {
  int64_t count = 0;
  double p50_us = 0, p99_us = 0, mean_us = 0, max_us = 0;
};

struct Phase {
  Path path = Path::kDirect;
  bool ceiling = false;
  int streams = 1;
  int round = 0;
  // Measured:
  int64_t requests = 0;
  int64_t events = 0;
  double wall_s = 0;
  double cpu_s = 0;          // all processes: stub, router and clients
  double router_cpu_s = -1;  // the router's process alone; -1 with --layout single
  int64_t switches = 0;
  LatencyStats latency;
  std::vector<std::string> errors;  // the first few

  double events_per_s() const { return wall_s > 0 ? events / wall_s : 0; }
  double cpu_us_per_event() const { return events > 0 ? 1e6 * cpu_s / events : 0; }
  double router_cpu_us_per_event() const {
    return events > 0 && router_cpu_s >= 0 ? 1e6 * router_cpu_s / events : -1;
  }
  double switches_per_event() const {
    return events > 0 ? static_cast<double>(switches) / static_cast<double>(events) : 0;
  }
  double cores_busy() const { return wall_s > 0 ? cpu_s / wall_s : 0; }
};

// Where the stub and the router listen, and the processes they run in (none with
// --layout single: theirs is this process's usage).
struct Servers {
  int stub_port = 0;
  int http_port = 0;
  int grpc_port = 0;
  ChildProcess* stub_process = nullptr;
  ChildProcess* router_process = nullptr;
};

struct Usages {
  CpuUsage all;
  double router_cpu_s = -1;
};

Usages TakeUsages(const Servers& servers) {
  Usages u;
  u.all = SelfUsage();
  for (ChildProcess* c : {servers.stub_process, servers.router_process}) {
    if (c == nullptr) continue;
    const CpuUsage cu = c->Usage();
    u.all.cpu_s += cu.cpu_s;
    if (c == servers.router_process) u.router_cpu_s = cu.cpu_s;
  }
  return u;
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return StrCat(a, " ", b, " ", c);
}

LatencyStats Summarize(std::vector<double> us) {
  LatencyStats s;
  if (us.empty()) return s;
  std::sort(us.begin(), us.end());
  auto at = [&](double q) {
    const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(us.size())));
    return us[std::min(us.size() - 1, rank == 0 ? 0 : rank - 1)];
  };
  s.count = static_cast<int64_t>(us.size());
  s.p50_us = at(0.50);
  s.p99_us = at(0.99);
  s.max_us = us.back();
  double sum = 0;
  for (double v : us) sum += v;
  s.mean_us = sum / static_cast<double>(us.size());
  return s;
}

// Plain words (" the", " and", ...): each decodes to its own text at once, so every event
// is exactly one delta at the client, and cycling through several shows reordering.
// *words: what the stub cycles through.
absl::StatusOr<ExpectedStream> ChooseTokens(
    const std::shared_ptr<const tokenizer::Tokenizer>& shared, int tokens,
    std::vector<int32_t>* words_out) {
  const tokenizer::Tokenizer& tok = *shared;
  std::vector<int32_t>& words = *words_out;
  for (int32_t id = 0; id < tok.vocab_size() && words.size() < 16; ++id) {
    const std::string& b = tok.TokenBytes(id);
    if (tok.IsSpecial(id) || b.size() < 3 || b[0] != ' ') continue;
    if (std::all_of(b.begin() + 1, b.end(), [](char c) { return c >= 'a' && c <= 'z'; })) {
      words.push_back(id);
    }
  }
  if (words.size() < 2) {
    return absl::FailedPreconditionError("the tokenizer has no plain-word tokens to emit");
  }
  ExpectedStream e;
  tokenizer::IncrementalDetokenizer detok(shared);
  for (int i = 0; i < tokens; ++i) {
    e.ids.push_back(words[static_cast<size_t>(i) % words.size()]);
    BATON_ASSIGN_OR_RETURN(std::string text, detok.Add(e.ids.back()));
    if (text.empty()) {
      return absl::FailedPreconditionError(
          StrCat("token ", e.ids.back(), " does not decode to text on its own"));
    }
    e.texts.push_back(std::move(text));
  }
  return e;
}

class Bench {
 public:
  Bench(const Flags& flags, const Servers& servers, StampTable* table,
        const ExpectedStream* expected)
      : flags_(flags), servers_(servers), table_(table), expected_(expected) {}

  Phase Run(Path path, int streams, bool ceiling) {
    Phase p;
    p.path = path;
    p.streams = streams;
    p.ceiling = ceiling;
    table_->Reset();
    table_->set_aligned(flags_.aligned);
    table_->set_interval(
        ceiling ? std::chrono::microseconds(0)
                : std::chrono::microseconds(static_cast<int64_t>(flags_.interval_ms * 1000)));
    const int port = path == Path::kDirect ? servers_.stub_port
                     : path == Path::kHttp ? servers_.http_port
                                           : servers_.grpc_port;
    const std::string tag = StrCat("p", ++phase_count_);
    std::vector<Stream> out(static_cast<size_t>(streams));
    Window w = flags_.clients == "loop" ? RunOnLoop(path, port, ceiling, tag, out)
                                        : RunOnThreads(path, port, ceiling, tag, out);
    p.wall_s = std::chrono::duration<double>(w.t1 - w.t0).count();
    p.cpu_s = w.usage1.all.cpu_s - w.usage0.all.cpu_s;
    p.switches = w.usage1.all.switches - w.usage0.all.switches;
    if (w.usage0.router_cpu_s >= 0) p.router_cpu_s = w.usage1.router_cpu_s - w.usage0.router_cpu_s;

    int64_t calls = 0;
    for (const Stream& st : out) {
      calls += st.calls;
      for (const std::string& e : st.errors) AddError(p, e);
    }
    absl::Status waited = table_->WaitForCalls(calls, absl::Seconds(10));
    if (!waited.ok()) AddError(p, std::string(waited.message()));
    std::vector<double> added_us;
    for (const Stream& st : out) {
      for (const auto& [id, slot, received] : st.requests) {
        ++p.requests;
        p.events += static_cast<int64_t>(received.size());
        if (slot < 0) continue;
        const std::vector<Clock::time_point> written = table_->Stamps(slot);
        if (written.empty()) {
          AddError(p, StrCat("the stub has no record of request ", id));
          continue;
        }
        if (written.size() != received.size()) {
          AddError(p, StrCat("request ", id, ": the stub wrote ", written.size(),
                             " events, the client read ", received.size()));
          continue;
        }
        for (size_t i = 0; i < received.size(); ++i) {
          added_us.push_back(
              std::chrono::duration<double, std::micro>(received[i] - written[i]).count());
        }
      }
    }
    p.latency = Summarize(std::move(added_us));
    return p;
  }

 private:
  struct Stream {
    struct Request {
      std::string id;
      int64_t slot = -1;  // where the stub records its writes; -1: nowhere (ceiling)
      std::vector<Clock::time_point> received;
    };
    std::vector<Request> requests;
    int64_t calls = 0;  // warm-up included: what the stub will have seen end
    std::vector<std::string> errors;
  };

  // The measured phase's bounds, and the processes' usage at each.
  struct Window {
    Usages usage0, usage1;
    Clock::time_point t0, t1;
  };

  // Request k of stream s: its id and stamp slot. False when the stream is done: after
  // --requests-per-stream requests, or in ceiling mode once the deadline passed (at least
  // one request each).
  bool NextRequest(Stream& st, int s, int k, bool ceiling, const std::string& tag,
                   Clock::time_point deadline) const {
    if (ceiling ? (k > 0 && Clock::now() >= deadline) : k >= flags_.requests) return false;
    auto& [id, slot, received] = st.requests.emplace_back();
    id = StrCat(tag, "-s", s, "-r", k);
    if (!ceiling) {
      slot = int64_t{s} * flags_.requests + k;
      id = StrCat(id, "#", slot);
    }
    received.reserve(static_cast<size_t>(flags_.tokens));
    ++st.calls;
    return true;
  }

  Clock::time_point Deadline() const {
    return Clock::now() +
           std::chrono::microseconds(static_cast<int64_t>(flags_.ceiling_seconds * 1e6));
  }

  // One thread and one blocking client per stream.
  Window RunOnThreads(Path path, int port, bool ceiling, const std::string& tag,
                      std::vector<Stream>& out) {
    const int streams = static_cast<int>(out.size());
    // Kept until the figures are taken, so that tearing down connections is not counted.
    std::vector<std::unique_ptr<StreamClient>> clients(out.size());
    std::latch ready(streams + 1);
    std::latch go(1);
    std::vector<std::thread> threads;
    threads.reserve(out.size());
    for (int s = 0; s < streams; ++s) {
      threads.emplace_back([&, s] {
        Stream& st = out[static_cast<size_t>(s)];
        absl::StatusOr<std::unique_ptr<StreamClient>> client =
            MakeStreamClient(path, port, expected_, {.http_quickack = flags_.http_quickack});
        // Connection set-up and first-call costs stay out of the figures.
        if (client.ok()) {
          clients[static_cast<size_t>(s)] = *std::move(client);
          std::vector<Clock::time_point> ignored;
          ++st.calls;
          absl::Status w = clients[static_cast<size_t>(s)]->Run(StrCat(tag, "-s", s, "-w"),
                                                                WarmUpTokens(), &ignored);
          if (!w.ok()) st.errors.push_back(std::string(w.message()));
        } else {
          st.errors.push_back(std::string(client.status().message()));
        }
        ready.arrive_and_wait();
        go.wait();
        if (!st.errors.empty()) return;
        const Clock::time_point deadline = Deadline();
        for (int k = 0; NextRequest(st, s, k, ceiling, tag, deadline); ++k) {
          Stream::Request& r = st.requests.back();
          absl::Status done =
              clients[static_cast<size_t>(s)]->Run(r.id, flags_.tokens, &r.received);
          if (!done.ok()) {
            st.errors.push_back(std::string(done.message()));
            break;
          }
        }
      });
    }
    Window w;
    ready.arrive_and_wait();
    w.usage0 = TakeUsages(servers_);
    w.t0 = Clock::now();
    go.count_down();
    for (std::thread& t : threads) t.join();
    w.t1 = Clock::now();
    w.usage1 = TakeUsages(servers_);
    return w;
  }

  // Every stream on one loop thread (frontdoor_loop_clients.h).
  Window RunOnLoop(Path path, int port, bool ceiling, const std::string& tag,
                   std::vector<Stream>& out) {
    Window w;
    const int streams = static_cast<int>(out.size());
    absl::StatusOr<std::unique_ptr<LoopClients>> made =
        LoopClients::Create(path, port, streams, expected_);
    if (!made.ok()) {
      out[0].errors.push_back(std::string(made.status().message()));
      w.usage0 = w.usage1 = TakeUsages(servers_);
      w.t0 = w.t1 = Clock::now();
      return w;
    }
    LoopClients& loop = **made;
    std::vector<std::vector<Clock::time_point>> ignored(out.size());
    std::latch warmed(1);
    int pending = streams;  // the loop thread's alone
    Clock::time_point deadline;
    // Starts stream s's request k, or ends the stream; the last stream to end stops the loop.
    std::function<void(int, int)> next = [&](int s, int k) {
      Stream& st = out[static_cast<size_t>(s)];
      if (!st.errors.empty() || !NextRequest(st, s, k, ceiling, tag, deadline)) {
        if (--pending == 0) loop.Stop();
        return;
      }
      Stream::Request& r = st.requests.back();
      loop.Start(s, r.id, flags_.tokens, &r.received, [&, s, k](const absl::Status& done) {
        if (!done.ok()) out[static_cast<size_t>(s)].errors.push_back(std::string(done.message()));
        next(s, k + 1);
      });
    };
    std::thread runner([&] { loop.Run(); });
    loop.Post([&] {
      for (int s = 0; s < streams; ++s) {
        ++out[static_cast<size_t>(s)].calls;
        loop.Start(s, StrCat(tag, "-s", s, "-w"), WarmUpTokens(), &ignored[static_cast<size_t>(s)],
                   [&, s](const absl::Status& done) {
                     if (!done.ok()) {
                       out[static_cast<size_t>(s)].errors.push_back(std::string(done.message()));
                     }
                     if (--pending == 0) warmed.count_down();
                   });
      }
    });
    warmed.wait();
    w.usage0 = TakeUsages(servers_);
    w.t0 = Clock::now();
    loop.Post([&] {
      pending = streams;
      deadline = Deadline();
      for (int s = 0; s < streams; ++s) next(s, 0);
    });
    runner.join();
    w.t1 = Clock::now();
    w.usage1 = TakeUsages(servers_);
    return w;
  }

  int WarmUpTokens() const { return std::min(4, flags_.tokens); }

  static void AddError(Phase& p, std::string e) {
    if (p.errors.size() < 5) p.errors.push_back(std::move(e));
  }

  const Flags& flags_;
  Servers servers_;
  StampTable* table_;
  const ExpectedStream* expected_;
  int phase_count_ = 0;
};

const Phase* Find(const std::vector<Phase>& phases, Path path, int streams, bool ceiling,
                  int round = 0) {
  for (const Phase& p : phases) {
    if (p.path == path && p.streams == streams && p.ceiling == ceiling && p.round == round) {
      return &p;
    }
  }
  return nullptr;
}

std::string RouterCpu(const Phase& p) {
  const double us = p.router_cpu_us_per_event();
  if (us < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", us);
  return buf;
}

void PrintOverhead(const Flags& f, const std::vector<Phase>& phases) {
  std::printf(
      "\noverhead: the stub writes one token every %.3g ms%s; added latency = client read - "
      "stub write (us)\n",
      f.interval_ms, f.aligned ? ", all streams on the same tick" : " per stream");
  std::printf("%-7s %7s %8s %9s %8s %8s %8s %9s %10s %9s %6s %6s %6s\n", "path", "streams",
              "events", "offered/s", "p50", "p99", "mean", "max", "cpu us/ev", "router/ev",
              "csw/ev", "cores", "load");
  for (const Phase& p : phases) {
    if (p.ceiling) continue;
    const double offered = p.streams * 1000.0 / f.interval_ms;
    const Phase* ceil = Find(phases, p.path, p.streams, true);
    const std::string load =
        ceil != nullptr && ceil->events_per_s() > 0
            ? StrCat(static_cast<int>(100 * offered / ceil->events_per_s()), "%")
            : "-";
    const std::string name =
        f.rounds > 1 ? StrCat(PathName(p.path), "#", p.round + 1) : std::string(PathName(p.path));
    std::printf("%-7s %7d %8lld %9.0f %8.0f %8.0f %8.0f %9.0f %10.1f %9s %6.1f %6.2f %6s\n",
                name.c_str(), p.streams, static_cast<long long>(p.events), offered,
                p.latency.p50_us, p.latency.p99_us, p.latency.mean_us, p.latency.max_us,
                p.cpu_us_per_event(), RouterCpu(p).c_str(), p.switches_per_event(), p.cores_busy(),
                load.c_str());
  }
  std::printf(
      "(cpu us/ev: all processes; router/ev: the router's process alone; csw/ev: this "
      "process's context switches, which with --layout processes are the clients' alone. "
      "load: offered events/s as a share of the same path's ceiling at that stream count, "
      "when measured)\n");
  std::printf("router share = path - direct (us):\n");
  for (const Phase& p : phases) {
    if (p.ceiling || p.path == Path::kDirect) continue;
    const Phase* d = Find(phases, Path::kDirect, p.streams, false, p.round);
    if (d == nullptr) continue;
    if (f.rounds > 1) std::printf("  round %d", p.round + 1);
    std::printf("  %-5s %3d streams: p50 %+7.0f  p99 %+7.0f  mean %+7.0f  cpu/ev %+7.1f\n",
                std::string(PathName(p.path)).c_str(), p.streams,
                p.latency.p50_us - d->latency.p50_us, p.latency.p99_us - d->latency.p99_us,
                p.latency.mean_us - d->latency.mean_us,
                p.cpu_us_per_event() - d->cpu_us_per_event());
  }
}

void PrintCeiling(const std::vector<Phase>& phases) {
  std::printf("\nceiling: the stub writes as fast as gRPC takes; content events read per second\n");
  std::printf("%-7s %7s %9s %10s %9s %10s %9s %6s %6s\n", "path", "streams", "events", "tokens/s",
              "vs direct", "cpu us/ev", "router/ev", "csw/ev", "cores");
  for (const Phase& p : phases) {
    if (!p.ceiling) continue;
    const Phase* d = Find(phases, Path::kDirect, p.streams, true);
    char ratio[16] = "-";
    if (d != nullptr && d->events_per_s() > 0) {
      std::snprintf(ratio, sizeof(ratio), "%.2f", p.events_per_s() / d->events_per_s());
    }
    std::printf("%-7s %7d %9lld %10.0f %9s %10.1f %9s %6.1f %6.2f\n",
                std::string(PathName(p.path)).c_str(), p.streams, static_cast<long long>(p.events),
                p.events_per_s(), ratio, p.cpu_us_per_event(), RouterCpu(p).c_str(),
                p.switches_per_event(), p.cores_busy());
  }
}

// The issue's target: the p99 latency that the router path adds per token event over
// calling the worker directly, under target_p99_us at target_streams. Each round compares
// a path with the direct phase run just before it; over several rounds the median share
// decides, because one p99 on a shared machine swings by milliseconds. Returns false when
// a measured path misses it.
bool PrintTarget(const Flags& f, const std::vector<Phase>& phases) {
  bool all = true;
  std::printf(
      "\ntarget: router share of the p99 (path p99 - direct p99, same round) < %.0f us "
      "at %d streams\n",
      f.target_p99_us, f.target_streams);
  for (Path path : {Path::kHttp, Path::kGrpc}) {
    std::vector<double> shares;
    std::vector<double> absolute;
    for (int round = 0; round < f.rounds; ++round) {
      const Phase* p = Find(phases, path, f.target_streams, false, round);
      const Phase* d = Find(phases, Path::kDirect, f.target_streams, false, round);
      if (p == nullptr || d == nullptr || p->latency.count == 0 || d->latency.count == 0) continue;
      shares.push_back(p->latency.p99_us - d->latency.p99_us);
      absolute.push_back(p->latency.p99_us);
    }
    if (shares.empty()) {
      std::printf("  %-5s not measured (--mode overhead, --paths with direct, --streams with %d)\n",
                  std::string(PathName(path)).c_str(), f.target_streams);
      continue;
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      const size_t n = v.size();
      return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    };
    const double share = median(shares);
    const bool pass = share < f.target_p99_us;
    all = all && pass;
    std::printf("  %-5s share %+.0f us (median of %zu rounds; path p99 itself %.0f us): %s\n",
                std::string(PathName(path)).c_str(), share, shares.size(), median(absolute),
                pass ? "PASS" : "FAIL");
  }
  return all;
}

nlohmann::json ToJson(const Phase& p) {
  return {{"path", PathName(p.path)},
          {"mode", p.ceiling ? "ceiling" : "overhead"},
          {"streams", p.streams},
          {"round", p.round},
          {"requests", p.requests},
          {"events", p.events},
          {"wall_s", p.wall_s},
          {"cpu_s", p.cpu_s},
          {"events_per_s", p.events_per_s()},
          {"cpu_us_per_event", p.cpu_us_per_event()},
          {"router_cpu_us_per_event", p.router_cpu_us_per_event()},
          {"context_switches_per_event", p.switches_per_event()},
          {"added_us",
           {{"p50", p.latency.p50_us},
            {"p99", p.latency.p99_us},
            {"mean", p.latency.mean_us},
            {"max", p.latency.max_us}}},
          {"errors", p.errors}};
}

router::RouterOptions RouterOptionsFor(const Flags& f, const std::string& worker) {
  router::RouterOptions options;
  options.worker = worker;
  options.tokenizer = f.model_dir;
  options.http_port = 0;
  options.grpc_port = 0;
  options.grpc_threads = f.grpc_threads;
  options.worker_wait = absl::Seconds(10);
  return options;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "frontdoor_bench: %s\n", std::string(s.message()).c_str());
  return 2;
}

// The stub's part, its words chosen as the parent chooses them.
absl::StatusOr<std::unique_ptr<StubWorker>> StartStub(const Flags& f,
                                                      const tokenizer::TokenizerFiles& files,
                                                      StampTable* table) {
  std::vector<int32_t> words;
  BATON_RETURN_IF_ERROR(ChooseTokens(files.tokenizer, f.tokens, &words).status());
  return StubWorker::Start(words, std::max<int64_t>(4096, f.tokens + 64),
                           files.tokenizer->vocab_size(), table);
}

// A child process's part (--role): serves until SIGTERM, having written where it listens
// on --ready-fd.
int RunChild(const Flags& f) {
  BlockStopSignals();  // before any thread starts, so that all of them inherit the mask
  std::unique_ptr<StampTable> table;
  std::unique_ptr<StubWorker> stub;
  std::unique_ptr<router::RouterServer> router;
  std::string ready;
  if (f.role == "stub") {
    absl::StatusOr<std::unique_ptr<StampTable>> attached = StampTable::Attach(f.stamps_fd);
    if (!attached.ok()) return Fail(attached.status());
    table = *std::move(attached);
    absl::StatusOr<tokenizer::TokenizerFiles> files = tokenizer::LoadTokenizerFiles(f.model_dir);
    if (!files.ok()) return Fail(files.status());
    absl::StatusOr<std::unique_ptr<StubWorker>> started = StartStub(f, *files, table.get());
    if (!started.ok()) return Fail(started.status());
    stub = *std::move(started);
    ready = StrCat(stub->port());
  } else {
    absl::StatusOr<std::unique_ptr<router::RouterServer>> started =
        router::RouterServer::Start(RouterOptionsFor(f, f.worker));
    if (!started.ok()) return Fail(started.status());
    router = *std::move(started);
    ready = StrCat(router->http_port(), " ", router->grpc_port());
  }
  ready += "\n";
  if (write(f.ready_fd, ready.data(), ready.size()) != static_cast<ssize_t>(ready.size())) {
    return Fail(absl::InternalError(StrCat("cannot write to --ready-fd ", f.ready_fd)));
  }
  close(f.ready_fd);
  WaitForStopSignal();
  if (router != nullptr) router->Shutdown(absl::ZeroDuration());
  if (stub != nullptr) stub->Shutdown();
  return 0;
}

// Numbers separated by spaces, as a child writes its ports.
absl::StatusOr<std::vector<int>> ParsePorts(const std::string& line, size_t count) {
  std::vector<int> ports;
  std::istringstream in(line);
  int port = 0;
  while (in >> port) ports.push_back(port);
  if (ports.size() != count || !in.eof()) {
    return absl::InternalError(StrCat("a child process said '", line, "', not ", count, " ports"));
  }
  return ports;
}

int Main(int argc, char** argv) {
  Flags f;
  CLI::App app{
      "frontdoor_bench: the router's added latency per token event and its throughput "
      "ceiling, against a stub worker in the same process (docs/perf/frontdoor.md)"};
  app.add_option("--streams", f.streams, "concurrent streams in overhead mode (comma list)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--ceiling-streams", f.ceiling_streams,
                 "concurrent streams in ceiling mode (comma list)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--tokens-per-request", f.tokens, "token events per request (max_tokens)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--requests-per-stream", f.requests,
                 "requests each stream sends, one after another, in overhead mode")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--interval-ms", f.interval_ms, "overhead mode: time between a stream's tokens")
      ->check(CLI::Range(0.01, 10000.0))
      ->capture_default_str();
  app.add_option("--ceiling-seconds", f.ceiling_seconds,
                 "ceiling mode: each stream starts requests for this long")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  app.add_option("--mode", f.mode, "what to measure")
      ->check(CLI::IsMember({"overhead", "ceiling", "both"}))
      ->capture_default_str();
  app.add_option("--model-dir", f.model_dir, "the tokenizer the router loads")
      ->capture_default_str();
  app.add_option("--json", f.json, "also write the results here");
  app.add_option("--target-streams", f.target_streams, "stream count the target applies to")
      ->capture_default_str();
  app.add_option("--target-p99-us", f.target_p99_us, "target p99 added latency per event")
      ->capture_default_str();
  app.add_flag("--require-target", f.require_target,
               "exit non-zero when the target is missed (off: CI timing is noisy)");
  app.add_option("--paths", f.paths, "which paths to measure (comma list)")
      ->delimiter(',')
      ->check(CLI::IsMember({"direct", "http", "grpc"}))
      ->capture_default_str();
  app.add_option("--rounds", f.rounds,
                 "overhead mode: repeat the phases this many times; the target uses the median")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--grpc-threads", f.grpc_threads,
                 "the router's gRPC threads (Generate, and HTTP requests' worker streams)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--layout", f.layout,
                 "processes: the stub worker and the router each in a process of their own, "
                 "as deployed; single: everything in this process")
      ->check(CLI::IsMember({"processes", "single"}))
      ->capture_default_str();
  app.add_option("--client-poll-strategy", f.client_poll_strategy,
                 "diagnosis: GRPC_POLL_STRATEGY for the clients' process only (with "
                 "--layout processes). 'poll' makes each stream's thread poll its own "
                 "socket, where epoll1 hands reads between the 64 client threads; the "
                 "direct baseline's tail then shrinks (docs/perf/frontdoor.md)")
      ->check(CLI::IsMember({"", "epoll1", "poll"}));
  app.add_option("--clients", f.clients,
                 "loop: every stream of a phase on one client thread (one gRPC completion "
                 "queue, one asio loop for HTTP), as vLLM's bench serve runs its clients; "
                 "threads: one thread and one blocking client per stream, as before "
                 "2026-11-30 (docs/perf/frontdoor.md)")
      ->check(CLI::IsMember({"loop", "threads"}))
      ->capture_default_str();
  // Set by the parent on the processes it starts; hidden from --help.
  app.add_option("--role", f.role)->check(CLI::IsMember({"stub", "router"}))->group("");
  app.add_option("--ready-fd", f.ready_fd)->group("");
  app.add_option("--stamps-fd", f.stamps_fd)->group("");
  app.add_option("--worker", f.worker)->group("");
  app.add_flag("--aligned", f.aligned,
               "overhead mode: every stream's token at the same tick, as a batching engine "
               "emits a step's tokens together (default: each stream on its own clock)");
  app.add_flag("--http-quickack", f.http_quickack,
               "diagnosis: the HTTP clients re-arm TCP_QUICKACK after every read, so that a "
               "server without TCP_NODELAY is not held up by delayed ACKs");
  CLI11_PARSE(app, argc, argv);
  if (!f.role.empty()) return RunChild(f);
  if (!f.client_poll_strategy.empty() && f.layout != "processes") {
    return Fail(absl::InvalidArgumentError(
        "--client-poll-strategy needs --layout processes: in one process it would change "
        "the router's polling too"));
  }

  if (f.http_quickack && f.clients != "threads") {
    return Fail(absl::InvalidArgumentError(
        "--http-quickack is a diagnosis of the blocking clients: add --clients threads"));
  }

  absl::StatusOr<tokenizer::TokenizerFiles> files = tokenizer::LoadTokenizerFiles(f.model_dir);
  if (!files.ok()) return Fail(files.status());
  std::vector<int32_t> words;
  absl::StatusOr<ExpectedStream> expected = ChooseTokens(files->tokenizer, f.tokens, &words);
  if (!expected.ok()) return Fail(expected.status());
  const int max_streams = *std::max_element(f.streams.begin(), f.streams.end());
  absl::StatusOr<std::unique_ptr<StampTable>> table =
      StampTable::Create(int64_t{max_streams} * f.requests, f.tokens);
  if (!table.ok()) return Fail(table.status());

  Servers servers;
  std::unique_ptr<StubWorker> stub;
  std::unique_ptr<router::RouterServer> router;
  std::unique_ptr<ChildProcess> stub_process;
  std::unique_ptr<ChildProcess> router_process;
  if (f.layout == "single") {
    absl::StatusOr<std::unique_ptr<StubWorker>> started = StartStub(f, *files, table->get());
    if (!started.ok()) return Fail(started.status());
    stub = *std::move(started);
    absl::StatusOr<std::unique_ptr<router::RouterServer>> r =
        router::RouterServer::Start(RouterOptionsFor(f, stub->address()));
    if (!r.ok()) return Fail(r.status());
    router = *std::move(r);
    servers = {stub->port(), router->http_port(), router->grpc_port(), nullptr, nullptr};
  } else {
    // Started before this process makes any gRPC object, so nothing of gRPC is forked.
    const std::vector<std::string> common = {"--model-dir", f.model_dir, "--tokens-per-request",
                                             StrCat(f.tokens)};
    std::vector<std::string> args = {"--role", "stub", "--stamps-fd", StrCat((*table)->fd())};
    args.insert(args.end(), common.begin(), common.end());
    absl::StatusOr<std::unique_ptr<ChildProcess>> s = ChildProcess::Spawn("stub", args);
    if (!s.ok()) return Fail(s.status());
    stub_process = *std::move(s);
    absl::StatusOr<std::vector<int>> stub_port = ParsePorts(stub_process->ready_line(), 1);
    if (!stub_port.ok()) return Fail(stub_port.status());
    args = {"--role",         "router",
            "--worker",       StrCat("127.0.0.1:", (*stub_port)[0]),
            "--grpc-threads", StrCat(f.grpc_threads)};
    args.insert(args.end(), common.begin(), common.end());
    absl::StatusOr<std::unique_ptr<ChildProcess>> r = ChildProcess::Spawn("router", args);
    if (!r.ok()) return Fail(r.status());
    router_process = *std::move(r);
    absl::StatusOr<std::vector<int>> router_ports = ParsePorts(router_process->ready_line(), 2);
    if (!router_ports.ok()) return Fail(router_ports.status());
    servers = {(*stub_port)[0], (*router_ports)[0], (*router_ports)[1], stub_process.get(),
               router_process.get()};
  }

  const std::string load_before = LoadAverage();
  std::printf(
      "frontdoor_bench: %u hardware threads, load average %s; %d tokens/request; %s; %s%s\n",
      std::thread::hardware_concurrency(), load_before.c_str(), f.tokens,
      f.layout == "single" ? "stub, router and clients in one process"
                           : "stub, router and clients in three processes",
      f.clients == "loop" ? "clients on one loop thread" : "one client thread per stream",
      f.http_quickack ? "; HTTP clients with TCP_QUICKACK" : "");
  if (!f.client_poll_strategy.empty()) {
    // The children are running already: only this process's clients poll this way.
    setenv("GRPC_POLL_STRATEGY", f.client_poll_strategy.c_str(), 1);
  }
  Bench bench(f, servers, table->get(), &*expected);
  std::vector<Phase> phases;
  auto run_all = [&](const std::vector<int>& counts, bool ceiling, int round) {
    for (int streams : counts) {
      // Back to back per stream count, so that a change in background load hits the
      // baseline and the router paths alike.
      for (Path path : {Path::kDirect, Path::kHttp, Path::kGrpc}) {
        if (std::find(f.paths.begin(), f.paths.end(), PathName(path)) == f.paths.end()) continue;
        phases.push_back(bench.Run(path, streams, ceiling));
        phases.back().round = round;
        const Phase& p = phases.back();
        std::fprintf(stderr, "  %s %s %d streams: %lld events in %.2f s%s\n",
                     ceiling ? "ceiling" : "overhead", std::string(PathName(path)).c_str(), streams,
                     static_cast<long long>(p.events), p.wall_s,
                     p.errors.empty() ? "" : " (errors)");
      }
    }
  };
  if (f.mode != "ceiling") {
    for (int round = 0; round < f.rounds; ++round) run_all(f.streams, false, round);
  }
  if (f.mode != "overhead") run_all(f.ceiling_streams, true, 0);
  const std::string load_after = LoadAverage();
  if (router != nullptr) router->Shutdown(absl::ZeroDuration());
  if (stub != nullptr) stub->Shutdown();
  // A child that does not stop cleanly on SIGTERM crashed or hung: the run fails.
  std::vector<std::string> stop_errors;
  for (auto* c : {&router_process, &stub_process}) {
    if (*c == nullptr) continue;
    const pid_t pid = (*c)->pid();
    if (!(*c)->Stop())
      stop_errors.push_back(StrCat("child process ", pid, " did not exit cleanly"));
  }

  if (f.mode != "ceiling") PrintOverhead(f, phases);
  if (f.mode != "overhead") PrintCeiling(phases);
  const bool target_met = f.mode == "ceiling" || PrintTarget(f, phases);
  std::printf("load average before %s, after %s\n", load_before.c_str(), load_after.c_str());

  bool ok = true;
  for (const std::string& e : stop_errors) {
    ok = false;
    std::fprintf(stderr, "ERROR %s\n", e.c_str());
  }
  for (const Phase& p : phases) {
    for (const std::string& e : p.errors) {
      ok = false;
      std::fprintf(stderr, "ERROR %s %s %d streams: %s\n", p.ceiling ? "ceiling" : "overhead",
                   std::string(PathName(p.path)).c_str(), p.streams, e.c_str());
    }
    if (p.events == 0) {
      ok = false;
      std::fprintf(stderr, "ERROR %s %d streams: no events\n",
                   std::string(PathName(p.path)).c_str(), p.streams);
    }
  }
  if (!f.json.empty()) {
    nlohmann::json j = {{"layout", f.layout},
                        {"interval_ms", f.interval_ms},
                        {"client_poll_strategy", f.client_poll_strategy},
                        {"clients", f.clients},
                        {"http_quickack", f.http_quickack},
                        {"aligned", f.aligned},
                        {"tokens_per_request", f.tokens},
                        {"requests_per_stream", f.requests},
                        {"ceiling_seconds", f.ceiling_seconds},
                        {"hardware_threads", std::thread::hardware_concurrency()},
                        {"load_average_before", load_before},
                        {"load_average_after", load_after},
                        {"target_p99_us", f.target_p99_us},
                        {"target_streams", f.target_streams},
                        {"target_met", target_met},
                        {"ok", ok},
                        {"phases", nlohmann::json::array()}};
    for (const Phase& p : phases) j["phases"].push_back(ToJson(p));
    std::ofstream out(f.json);
    out << j.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "frontdoor_bench: cannot write %s\n", f.json.c_str());
      return 2;
    }
  }
  if (!ok) return 1;
  if (f.require_target && !target_met) return 3;
  return 0;
}

}  // namespace
}  // namespace baton::bench

int main(int argc, char** argv) { return baton::bench::Main(argc, argv); }
