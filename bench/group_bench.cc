// Worker groups against one rank, on this host (docs/perf/parallel.md):
//   - decode: tokens/s of TP=2 (one thread per rank) against TP=1 with one thread and
//     with two, at --batch sequences after a --prompt-token prompt each;
//   - pipeline: tokens/s of PP=2 (one thread per stage) against PP=1 with one thread at
//     --pp-batch sequences, and the bubble: the share of the stages' time spent waiting.
// Every rank is a thread with its own shard, pages, compute thread and gloo
// communicators (loopback TCP, as between processes). Each rank's time in the
// communicator is counted, so a step splits into compute, collectives and the leader's
// plan broadcast.
//
//   build/release/bin/group_bench --model build/bench-models/llama3.2-1b
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/install_paths.h"
#include "common/strings.h"
#include "engine/loaded_model.h"
#include "engine/model_runner.h"
#include "engine/parallel/worker_group.h"
#include "kernels/cpu/matmul.h"

namespace baton::bench {
namespace {

using Clock = std::chrono::steady_clock;
using engine::ForwardOutput;
using engine::SequenceInput;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Counts the time a rank spends inside its communicator.
class TimedCommunicator : public parallel::Communicator {
 public:
  TimedCommunicator(std::unique_ptr<parallel::Communicator> inner, std::atomic<int64_t>* ns)
      : inner_(std::move(inner)), ns_(ns) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::chrono::milliseconds timeout() const override { return inner_->timeout(); }
  const char* backend() const override { return inner_->backend(); }
  absl::Status AllReduceSum(std::span<float> d) override {
    return Time([&] { return inner_->AllReduceSum(d); });
  }
  absl::Status AllReduceSumBf16(std::span<uint16_t> d) override {
    return Time([&] { return inner_->AllReduceSumBf16(d); });
  }
  absl::Status AllGather(std::span<const std::byte> in, std::span<std::byte> out) override {
    return Time([&] { return inner_->AllGather(in, out); });
  }
  absl::Status Broadcast(std::span<std::byte> d, int root) override {
    return Time([&] { return inner_->Broadcast(d, root); });
  }
  absl::Status Send(std::span<const std::byte> d, int peer, uint32_t tag) override {
    return Time([&] { return inner_->Send(d, peer, tag); });
  }
  absl::Status Recv(std::span<std::byte> d, int peer, uint32_t tag) override {
    return Time([&] { return inner_->Recv(d, peer, tag); });
  }
  absl::StatusOr<std::unique_ptr<parallel::Pending>> PostSend(std::span<const std::byte> d,
                                                              int peer, uint32_t tag) override {
    return Wrap(inner_->PostSend(d, peer, tag));
  }
  absl::StatusOr<std::unique_ptr<parallel::Pending>> PostRecv(std::span<std::byte> d, int peer,
                                                              uint32_t tag) override {
    return Wrap(inner_->PostRecv(d, peer, tag));
  }
  absl::Status Barrier() override {
    return Time([&] { return inner_->Barrier(); });
  }

 private:
  // A posted transfer's Wait is time the rank spends waiting, too.
  class TimedPending : public parallel::Pending {
   public:
    TimedPending(std::unique_ptr<parallel::Pending> inner, TimedCommunicator* owner)
        : inner_(std::move(inner)), owner_(owner) {}
    absl::Status Wait() override {
      return owner_->Time([&] { return inner_->Wait(); });
    }

   private:
    std::unique_ptr<parallel::Pending> inner_;
    TimedCommunicator* owner_;
  };
  absl::StatusOr<std::unique_ptr<parallel::Pending>> Wrap(
      absl::StatusOr<std::unique_ptr<parallel::Pending>> p) {
    if (!p.ok()) return p;
    return std::unique_ptr<parallel::Pending>(new TimedPending(std::move(*p), this));
  }
  template <typename Fn>
  absl::Status Time(Fn&& fn) {
    const auto start = Clock::now();
    absl::Status s = fn();
    *ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
    return s;
  }
  std::unique_ptr<parallel::Communicator> inner_;
  std::atomic<int64_t>* ns_;
};

struct Flags {
  std::string model = DefaultModelPath();  // the bundled model (common/install_paths.h)
  int batch = 1;
  int pp_batch = 16;
  int prompt = 128;
  int steps = 32;
  int rounds = 3;
  int micro = 0;  // pipeline micro-batches per step; 0: the group's default (2 x pp)
  bool pp_only = false;
  std::string kv_dtype = "bf16";
};

// The batches of one run: a prefill of every sequence, then `steps` decode steps.
struct Workload {
  std::vector<std::vector<int32_t>> prompts, tables;
  std::vector<int32_t> next;  // each sequence's decode token (fixed: the numbers don't care)
  Workload(int batch, int prompt, int steps, int64_t vocab) {
    const int pages = (prompt + steps + 15) / 16;
    for (int s = 0; s < batch; ++s) {
      std::vector<int32_t> p;
      for (int i = 0; i < prompt; ++i) p.push_back(static_cast<int32_t>((s * 131 + i * 7) % vocab));
      prompts.push_back(p);
      std::vector<int32_t> t;
      for (int k = 0; k < pages; ++k) t.push_back(s * pages + k);
      tables.push_back(t);
      next.push_back(static_cast<int32_t>((s * 17 + 3) % vocab));
    }
  }
  int64_t pages() const { return static_cast<int64_t>(tables.size() * tables[0].size()); }
  std::vector<SequenceInput> Prefill() const {
    std::vector<SequenceInput> b;
    for (size_t s = 0; s < prompts.size(); ++s) {
      b.push_back({prompts[s], 0, tables[s], engine::LogitsWanted::kLast});
    }
    return b;
  }
  std::vector<SequenceInput> Decode(int step) const {
    std::vector<SequenceInput> b;
    for (size_t s = 0; s < prompts.size(); ++s) {
      b.push_back({std::span<const int32_t>(&next[s], 1),
                   static_cast<int64_t>(prompts[s].size()) + step, tables[s],
                   engine::LogitsWanted::kLast});
    }
    return b;
  }
};

struct Result {
  double tokens_per_s = 0;
  double comm_share = 0;  // leader's time in collectives (plan broadcast included) / wall
  double wait_share = 0;  // mean over ranks: time inside the communicator / wall
};

// Times decode on a backend: the prefill first (untimed), then the steps.
template <typename Forward>
double TimeDecode(const Workload& w, int steps, Forward&& forward) {
  ForwardOutput out;
  if (!forward(w.Prefill(), &out)) return 0;
  const auto start = Clock::now();
  for (int i = 0; i < steps; ++i) {
    if (!forward(w.Decode(i), &out)) return 0;
  }
  return Seconds(Clock::now() - start);
}

Result OneRank(const Flags& f, int threads, int batch) {
  auto m = engine::LoadModel(f.model);
  if (!m.ok()) {
    std::fprintf(stderr, "%s\n", std::string(m.status().message()).c_str());
    return {};
  }
  const Workload w(batch, f.prompt, f.steps, std::min<int64_t>(m->model->config().vocab_size, 256));
  auto pool =
      kvcache::KvPool::Create(engine::PageLayoutFor(m->model->config(), 16, f.kv_dtype), w.pages());
  ThreadPool pool_threads(threads);
  engine::ModelRunner runner(*m->model, pool->get(), &pool_threads);
  const double s = TimeDecode(w, f.steps, [&](std::vector<SequenceInput> b, ForwardOutput* out) {
    return runner.Forward(b, out).ok();
  });
  return {s > 0 ? batch * f.steps / s : 0, 0, 0};
}

Result OnGroup(const Flags& f, int tp, int pp, int batch) {
  const int size = tp * pp;
  std::string dir = (std::filesystem::temp_directory_path() / "baton-group-bench-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) return {};
  parallel::FileStore store(dir);
  engine::GroupOptions o;
  o.tp_size = tp;
  o.pp_size = pp;
  o.store = &store;
  o.timeout = std::chrono::seconds(120);
  o.micro_batches = f.micro;
  std::vector<std::unique_ptr<engine::LoadedModel>> models(size);
  std::vector<std::unique_ptr<engine::GroupComms>> comms(size);
  std::vector<std::atomic<int64_t>> comm_ns(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      engine::GroupOptions mine = o;
      mine.rank = r;
      auto m = engine::LoadModel(f.model, {}, engine::PlacementOf(mine));
      if (!m.ok()) return;
      models[r] = std::make_unique<engine::LoadedModel>(std::move(*m));
      auto c = engine::ConnectGroup(mine);
      if (!c.ok()) return;
      comms[r] = std::make_unique<engine::GroupComms>(std::move(*c));
      comms[r]->world =
          std::make_unique<TimedCommunicator>(std::move(comms[r]->world), &comm_ns[r]);
      if (comms[r]->tp) {
        comms[r]->tp = std::make_unique<TimedCommunicator>(std::move(comms[r]->tp), &comm_ns[r]);
      }
    });
  }
  for (auto& t : threads) t.join();
  threads.clear();
  for (int r = 0; r < size; ++r) {
    if (comms[r] == nullptr) {
      std::fprintf(stderr, "group_bench: rank %d did not start\n", r);
      return {};
    }
  }
  std::vector<std::unique_ptr<ThreadPool>> pools;
  for (int r = 0; r < size; ++r) pools.push_back(std::make_unique<ThreadPool>(1));
  for (int r = 1; r < size; ++r) {
    threads.emplace_back([&, r] {
      engine::GroupOptions mine = o;
      mine.rank = r;
      (void)engine::RunGroupFollower(*models[r]->model, mine, comms[r].get(), pools[r].get());
    });
  }
  const model::ModelConfig& config = models[0]->model->config();
  const Workload w(batch, f.prompt, f.steps, std::min<int64_t>(config.vocab_size, 256));
  const model::Shard shard = *model::PlanShard(config, engine::PlacementOf(o));
  auto kv =
      kvcache::KvPool::Create(engine::PageLayoutFor(shard, config, 16, f.kv_dtype), w.pages());
  Result res;
  {
    auto backend = engine::GroupBackend::Create(*models[0]->model, o, std::move(*comms[0]),
                                                kv->get(), pools[0].get());
    if (!backend.ok()) return {};
    bool counting = false;
    const double s = TimeDecode(w, f.steps, [&](std::vector<SequenceInput> b, ForwardOutput* o2) {
      if (!counting) {  // the first call is the untimed prefill: count from the first step
        counting = true;
        const bool ok = (*backend)->Forward(b, o2).ok();
        for (auto& ns : comm_ns) ns = 0;
        return ok;
      }
      return (*backend)->Forward(b, o2).ok();
    });
    res.tokens_per_s = s > 0 ? batch * f.steps / s : 0;
    double total = 0;
    for (auto& ns : comm_ns) total += static_cast<double>(ns.load()) / 1e9;
    res.comm_share = static_cast<double>(comm_ns[0].load()) / 1e9 / s;
    res.wait_share = total / size / s;
  }
  for (auto& t : threads) t.join();
  std::filesystem::remove_all(dir);
  return res;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main(int argc, char** argv) {
  CLI::App app{"Worker groups (TP, PP) against one rank, on this host", "group_bench"};
  Flags f;
  app.add_option("--model", f.model, "Model to run (HF directory or .gguf)");
  app.add_option("--batch", f.batch, "Sequences decoding together in the TP comparison");
  app.add_option("--pp-batch", f.pp_batch, "Sequences decoding together in the PP comparison");
  app.add_option("--prompt", f.prompt, "Prompt tokens per sequence before decoding");
  app.add_option("--steps", f.steps, "Decode steps timed per run");
  app.add_option("--rounds", f.rounds, "Alternating rounds (the median is reported)");
  app.add_option("--micro-batches", f.micro, "Pipeline micro-batches per step (0: 2 x pp)");
  app.add_option("--kv-cache-dtype", f.kv_dtype, "KV cache element type, as the engine's flag")
      ->check(CLI::IsMember({"bf16", "f32"}));
  app.add_flag("--pp-only", f.pp_only, "Only the pipeline comparison");
  CLI11_PARSE(app, argc, argv);
  std::printf("# group_bench: %s, ISA %s, %u cores, prompt %d, %d decode steps, median of %d\n",
              f.model.c_str(), cpu::ActiveIsa(), std::thread::hardware_concurrency(), f.prompt,
              f.steps, f.rounds);
  struct Config {
    const char* name;
    int tp, pp, threads, batch;
  };
  const std::vector<Config> configs = {{"tp1 x1 thread", 1, 1, 1, f.batch},
                                       {"tp1 x2 threads", 1, 1, 2, f.batch},
                                       {"tp2 x1 thread/rank", 2, 1, 1, f.batch},
                                       {"pp1 x1 thread", 1, 1, 1, f.pp_batch},
                                       {"pp2 x1 thread/stage", 1, 2, 1, f.pp_batch}};
  std::vector<std::vector<Result>> results(configs.size());
  for (int round = 0; round < f.rounds; ++round) {
    for (size_t c = f.pp_only ? 3 : 0; c < configs.size(); ++c) {
      const Config& k = configs[c];
      results[c].push_back(k.tp * k.pp == 1 ? OneRank(f, k.threads, k.batch)
                                            : OnGroup(f, k.tp, k.pp, k.batch));
    }
  }
  std::printf("%-22s %6s %12s %10s %14s %14s\n", "config", "batch", "tokens/s", "vs first",
              "leader_comm", "rank_wait");
  double base_tp = 0, base_pp = 0;
  for (size_t c = f.pp_only ? 3 : 0; c < configs.size(); ++c) {
    std::vector<double> tps, comm, wait;
    for (const Result& r : results[c]) {
      tps.push_back(r.tokens_per_s);
      comm.push_back(r.comm_share);
      wait.push_back(r.wait_share);
    }
    const double t = Median(tps);
    if (c == 0) base_tp = t;
    if (c == 3) base_pp = t;
    const double base = c < 3 ? base_tp : base_pp;
    std::printf("%-22s %6d %12.2f %10.3f %13.1f%% %13.1f%%\n", configs[c].name, configs[c].batch, t,
                base > 0 ? t / base : 0, 100 * Median(comm), 100 * Median(wait));
  }
  std::printf(
      "# leader_comm: the leader's time in the communicator (plan broadcast, all-reduces, "
      "gathers, receives) over the wall time;\n# rank_wait: the same, averaged over "
      "the ranks (for PP: the pipeline bubble plus transfer time).\n");
  return 0;
}

}  // namespace
}  // namespace baton::bench

int main(int argc, char** argv) { return baton::bench::Main(argc, argv); }
