// The routing simulator (issue 7, docs/perf/routing.md): every placement policy over the
// same workloads on the same simulated cluster, with the real KvIndex, policies and
// engine BlockManager; only time is modelled. Reports per workload and policy the prefix
// cache hit rate, TTFT p50/p99 and output tokens/s, then the ratios the goals name:
//
//   shared and chat: baton hit rate >= 1.5x sglang_cache_aware and >= 3x round_robin,
//                    baton TTFT p50 <= 0.7x sglang_cache_aware;
//   random:          baton within 2% of least_loaded (TTFT p50 and tokens/s).
//
//   router_sim --workers 16 --requests 3000                # the table
//   router_sim --workers 64 --workload shared --check      # exit 1 when a goal is missed
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/router_sim_cluster.h"
#include "bench/router_sim_workloads.h"
#include "common/strings.h"
#include "routing/routing_policy.h"

namespace baton::bench {
namespace {

struct Flags {
  int workers = 16;
  int64_t kv_blocks = 2048;
  int requests = 3000;
  std::vector<std::string> workloads = {"shared", "chat", "random"};
  std::vector<std::string> policies = routing::RoutingPolicyNames();
  // Offered load per worker, in requests per second, per workload: what 2048 pages and
  // the step model sustain with good cache reuse but not without it.
  double shared_rate = 0.8;
  double chat_rate = 0.5;
  double random_rate = 0.25;
  double event_lag_ms = 50;
  bool no_events = false;
  uint64_t seed = 1;
  bool check = false;
};

struct Row {
  std::string workload;
  SimResult r;
};

void Print(const std::vector<Row>& rows) {
  std::printf(
      "| workload | policy | requests | hit rate | ceiling | expected hits | TTFT p50 s | TTFT p99 "
      "s "
      "| output tok/s | evicted blocks | decide p99 us |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& row : rows) {
    const SimResult& r = row.r;
    std::printf("| %s | %s | %lld | %.3f | %.3f | %.3f | %.2f | %.2f | %.0f | %lld | %.1f |\n",
                row.workload.c_str(), r.policy.c_str(), static_cast<long long>(r.requests),
                r.hit_rate(), r.ceiling_hit_rate,
                r.prompt_tokens == 0 ? 0.0 : static_cast<double>(r.expected_hits) / r.prompt_tokens,
                r.ttft_p50, r.ttft_p99, r.output_tokens_per_second(),
                static_cast<long long>(r.evicted_blocks), r.decide_p99_us);
  }
}

// The goals, per workload; returns whether all that could be checked hold.
bool Check(const std::vector<Row>& rows) {
  std::map<std::string, std::map<std::string, SimResult>> by;
  for (const Row& row : rows) by[row.workload][row.r.policy] = row.r;
  bool ok = true;
  auto ratio = [](double a, double b) { return b == 0 ? 0.0 : a / b; };
  auto report = [&](const std::string& w, const char* what, double got, const char* op,
                    double goal) {
    const bool pass = std::string(op) == ">=" ? got >= goal : got <= goal;
    std::printf("%-7s %-42s %6.2f  goal %s %.2f  %s\n", w.c_str(), what, got, op, goal,
                pass ? "met" : "NOT MET");
    ok = ok && pass;
  };
  for (auto& [w, p] : by) {
    if (!p.contains("baton")) continue;
    const SimResult& b = p["baton"];
    if (w == "shared" || w == "chat") {
      if (p.contains("sglang_cache_aware")) {
        const SimResult& s = p["sglang_cache_aware"];
        report(w, "hit rate baton / sglang_cache_aware", ratio(b.hit_rate(), s.hit_rate()),
               ">=", 1.5);
        report(w, "TTFT p50 baton / sglang_cache_aware", ratio(b.ttft_p50, s.ttft_p50), "<=", 0.7);
      }
      if (p.contains("round_robin")) {
        report(w, "hit rate baton / round_robin", ratio(b.hit_rate(), p["round_robin"].hit_rate()),
               ">=", 3.0);
      }
    } else if (w == "random" && p.contains("least_loaded")) {
      const SimResult& l = p["least_loaded"];
      report(w, "TTFT p50 baton / least_loaded", ratio(b.ttft_p50, l.ttft_p50), "<=", 1.02);
      report(w, "output tok/s baton / least_loaded",
             ratio(b.output_tokens_per_second(), l.output_tokens_per_second()), ">=", 0.98);
    }
  }
  return ok;
}

int Main(int argc, char** argv) {
  Flags f;
  CLI::App app(
      "Routing simulator: the router's policies and KV index over simulated workers "
      "(docs/perf/routing.md)");
  app.add_option("--workers", f.workers, "colocated workers (8 to 256)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--kv-blocks", f.kv_blocks, "KV pages per worker (16 tokens each)")
      ->check(CLI::Range(int64_t{64}, int64_t{1} << 24));
  app.add_option("--requests", f.requests, "requests per workload")->check(CLI::Range(1, 10000000));
  app.add_option("--workload", f.workloads, "shared, chat, random")->delimiter(',');
  app.add_option("--policy", f.policies, "policies to compare")->delimiter(',');
  app.add_option("--shared-rate", f.shared_rate, "shared: requests/s per worker");
  app.add_option("--chat-rate", f.chat_rate, "chat: requests/s per worker");
  app.add_option("--random-rate", f.random_rate, "random: requests/s per worker");
  app.add_option("--event-lag-ms", f.event_lag_ms, "KV event delay, worker to router");
  app.add_flag("--no-events", f.no_events, "approximate index: remember what was sent where");
  app.add_option("--seed", f.seed, "workload seed");
  app.add_flag("--check", f.check, "exit 1 when a goal is not met");
  CLI11_PARSE(app, argc, argv);

  ClusterShape shape;
  shape.workers = f.workers;
  shape.kv_blocks = f.kv_blocks;
  shape.event_lag_seconds = f.event_lag_ms / 1000.0;
  shape.events = !f.no_events;
  // Baton's cost model gets the step model's rates: the calibration an operator does.
  routing::CostModel cost;
  cost.prefill_seconds_per_token = shape.step.prefill_token_seconds;
  cost.seconds_per_running = 2 * shape.step.decode_seq_seconds;

  std::vector<Row> rows;
  for (const std::string& w : f.workloads) {
    const double rate = w == "shared" ? f.shared_rate : w == "chat" ? f.chat_rate : f.random_rate;
    WorkloadShape ws{.name = w, .requests = f.requests, .rate = rate * f.workers, .seed = f.seed};
    int max_turns = 1;
    const std::vector<SimPrompt> prompts = MakeWorkload(ws, &max_turns);
    for (const std::string& name : f.policies) {
      absl::StatusOr<std::unique_ptr<routing::RoutingPolicy>> policy =
          routing::MakeRoutingPolicy(name, cost);
      if (!policy.ok()) {
        std::cerr << policy.status().message() << "\n";
        return 2;
      }
      std::fprintf(stderr, "router_sim: %s / %s ...\n", w.c_str(), name.c_str());
      rows.push_back({w, RunCluster(shape, prompts, max_turns, policy->get(), f.seed)});
    }
  }
  std::printf(
      "\n%d workers, %lld pages of 16 tokens each, %d requests per workload, events %s\n\n",
      f.workers, static_cast<long long>(f.kv_blocks), f.requests,
      f.no_events ? "off (approximate index)" : StrCat("on (lag ", f.event_lag_ms, " ms)").c_str());
  Print(rows);
  std::printf("\n");
  const bool ok = Check(rows);
  return f.check && !ok ? 1 : 0;
}

}  // namespace
}  // namespace baton::bench

int main(int argc, char** argv) { return baton::bench::Main(argc, argv); }
