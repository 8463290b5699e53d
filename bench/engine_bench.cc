// The CPU engine's speed against this machine's own limits, measured in the same run:
//   decode (batch 1): each step is followed by a streaming read of the bytes it had to
//     read (every weight matrix plus the KV cache so far); the read's time over the
//     step's is the share of the bound reached, reported as the median over the steps.
//     Beside it, each repetition against the best window of a probe run before it.
//   prefill (one 512-token prompt): the forward's FLOPs per second over the GEMM probe
//     (the matmul kernel alone on a large problem), run before each repetition.
// Absolute times on a shared machine mean little; these ratios are the figures.
// --kv-cache-dtype picks the KV pages' element type (bf16, the engine's default, or f32).
//
//   engine_bench --model models/baton-tiny --model build/bench-models/smollm2-135m
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/cpu_probes.h"
#include "common/thread_pool.h"
#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"
#include "kernels/cpu/matmul.h"
#include "kvcache/kv_pool.h"
#include "model/model.h"

namespace baton {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

uint64_t MatrixBytes(const cpu::MatrixRef& m) {
  return static_cast<uint64_t>(m.rows) * cpu::RowBytes(m.dtype, m.cols);
}

void Check(const absl::Status& status) {
  if (status.ok()) return;
  std::fprintf(stderr, "engine_bench: %s\n", std::string(status.message()).c_str());
  std::exit(1);
}

struct ModelCost {
  uint64_t weight_bytes = 0;   // matrices read by one decode step (embedding row excluded)
  double flops_per_token = 0;  // 2 x matrix elements of the transformer blocks
  double head_flops = 0;       // 2 x lm_head elements (once per sequence in prefill)
};

ModelCost Cost(const model::Model& m) {
  ModelCost c;
  for (const auto& l : m.weights().layers) {
    for (const model::Linear* lin : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) {
      c.weight_bytes += MatrixBytes(lin->weight);
      c.flops_per_token += 2.0 * static_cast<double>(lin->weight.rows * lin->weight.cols);
    }
  }
  const auto& head = m.weights().lm_head;
  c.weight_bytes += MatrixBytes(head);
  c.head_flops = 2.0 * static_cast<double>(head.rows * head.cols);
  return c;
}

struct Result {
  std::string name;
  std::string dtype;
  double huge_page_share = 0;  // of the weight bytes, on 2 MiB pages
  int prompt_tokens = 0;
  double decode_tok_s = 0;                       // best repetition
  double prefill_tok_s = 0, prefill_gflops = 0;  // best repetition
  // Decode: each step against a read of its own bytes timed right after it (so over the
  // same span and under the same neighbours), and each repetition against the best window
  // of the probe run before it. Prefill: each repetition against the GEMM probe run just
  // before it. The machine's bandwidth drifts over the minutes a run takes, so one probe
  // for all models misjudges some of them.
  std::vector<double> decode_share;       // per step: read time of its bytes / step time
  std::vector<double> decode_peak_share;  // per repetition: of the peak-window bound
  std::vector<double> prefill_share;      // per repetition: of the GEMM probe
  std::vector<double> bandwidth, gemm;    // paired reads (GB/s), GEMM probes (GFLOP/s)
};

struct Probes {
  ThreadPool* threads;
  int reps;
  bench::ReadProbe* read;
  double Gemm() const {
    return bench::MeasureGemmGflops(threads, cpu::DType::kBF16, 512, 2048, 2048, reps);
  }
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  if (n == 0) return 0;
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Bytes of this process's memory held with 2 MiB page-table entries: file maps
// (FilePmdMapped) and anonymous memory (AnonHugePages).
double HugePageBytes() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string line;
  double bytes = 0;
  while (std::getline(in, line)) {
    for (std::string_view field : {"FilePmdMapped:", "AnonHugePages:"}) {
      if (line.starts_with(field)) bytes += 1024.0 * std::stod(line.substr(field.size()));
    }
  }
  return bytes;
}

Result BenchModel(const std::string& path, ThreadPool* threads, const Probes& probes,
                  int prompt_tokens, int decode_tokens, int reps, bool use_mmap,
                  const std::string& kv_dtype, bool int8_activations) {
  const double huge_before = HugePageBytes();
  model::OpenOptions options;
  options.use_mmap = use_mmap;
  options.int8_activations = int8_activations;
  auto opened = model::Model::Open(path, options);
  if (!opened.ok()) {
    std::fprintf(stderr, "engine_bench: %s\n", std::string(opened.status().message()).c_str());
    std::exit(1);
  }
  const model::Model& m = **opened;
  const double huge_weights = HugePageBytes() - huge_before;  // before the KV pool exists
  const auto& cfg = m.config();
  const ModelCost cost = Cost(m);
  const double kv_bytes_per_pos =
      2.0 * static_cast<double>(cfg.num_layers * cfg.num_kv_heads * cfg.head_dim *
                                kvcache::DtypeBytes(kv_dtype));
  // A model with a short context (baton-tiny: 512) gets a prompt that leaves room for the
  // decode steps.
  prompt_tokens = static_cast<int>(
      std::min<int64_t>(prompt_tokens, cfg.max_position_embeddings - decode_tokens));
  const int64_t capacity = prompt_tokens + decode_tokens + 16;
  auto pool =
      *kvcache::KvPool::Create(engine::PageLayoutFor(cfg, 16, kv_dtype), (capacity + 15) / 16);
  std::vector<int32_t> blocks;
  while (pool->num_free_blocks() > 0) blocks.push_back(*pool->Allocate());
  engine::ModelRunner runner(m, pool.get(), threads);

  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(cfg.vocab_size - 1));
  std::vector<int32_t> prompt(prompt_tokens);
  for (int32_t& t : prompt) t = token(rng);

  const double attention_flops =
      4.0 * static_cast<double>(cfg.num_layers * cfg.num_heads * cfg.head_dim) *
      (static_cast<double>(prompt_tokens) * (prompt_tokens + 1) / 2);
  const double prefill_flops =
      cost.flops_per_token * prompt_tokens + cost.head_flops + attention_flops;
  Result res;
  engine::ForwardOutput out;
  double best_prefill = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double gemm = probes.Gemm();
    res.gemm.push_back(gemm);
    const engine::SequenceInput in{prompt, 0, blocks, engine::LogitsWanted::kLast};
    const auto t0 = Clock::now();
    Check(runner.Forward(std::span(&in, 1), &out));
    const double seconds = Since(t0);
    best_prefill = std::min(best_prefill, seconds);
    res.prefill_share.push_back(prefill_flops / seconds / 1e9 / gemm);
  }

  // Decode after the prompt: each step reads every matrix once and the KV cache so far.
  std::vector<int32_t> tokens = prompt;
  double best_decode = 1e30;
  // Greedy through the engine's own sampler, which a served decode step also runs.
  engine::SamplingParams greedy;
  greedy.temperature = 0;
  for (int r = 0; r < reps; ++r) {
    tokens.resize(prompt_tokens);
    engine::SequenceSampler sampler(greedy, prompt, 0);
    const bench::ReadBandwidth read = probes.read->Measure(probes.reps);
    double seconds = 0, bytes = 0;
    for (int i = 0; i < decode_tokens; ++i) {
      const auto t0 = Clock::now();
      const int32_t next = sampler.Sample(out.logits).id;
      sampler.Accept(next);
      tokens.push_back(next);
      const engine::SequenceInput in{std::span(tokens).last(1),
                                     static_cast<int64_t>(tokens.size()) - 1, blocks,
                                     engine::LogitsWanted::kLast};
      Check(runner.Forward(std::span(&in, 1), &out));
      const double step = Since(t0);
      // Every matrix, the LM head included, and the KV cache of every position so far.
      const double step_bytes = static_cast<double>(cost.weight_bytes) +
                                kv_bytes_per_pos * static_cast<double>(tokens.size());
      const double read_seconds = probes.read->TimeRead(step_bytes, read.pattern);
      res.decode_share.push_back(read_seconds / step);
      res.bandwidth.push_back(step_bytes / read_seconds / 1e9);
      seconds += step;
      bytes += step_bytes;
    }
    best_decode = std::min(best_decode, seconds / decode_tokens);
    res.decode_peak_share.push_back(bytes / seconds / (read.peak_gbs * 1e9));
  }

  res.name = cfg.name.empty() ? path : cfg.name;
  res.dtype = cpu::DTypeName(m.weights().layers[0].q.weight.dtype);
  res.huge_page_share =
      std::min(1.0, huge_weights / std::max(1.0, static_cast<double>(cost.weight_bytes)));
  res.decode_tok_s = 1.0 / best_decode;
  res.prompt_tokens = prompt_tokens;
  res.prefill_tok_s = prompt_tokens / best_prefill;
  res.prefill_gflops = prefill_flops / best_prefill / 1e9;
  return res;
}

}  // namespace
}  // namespace baton

int main(int argc, char** argv) {
  CLI::App app{"CPU engine benchmark: decode vs memory bandwidth, prefill vs the GEMM probe"};
  std::vector<std::string> models;
  int threads = 0, prompt_tokens = 512, decode_tokens = 32, reps = 5;
  bool quick = false, no_mmap = false;
  std::string kv_dtype = "bf16", quant_activations = "int8";
  app.add_option("--model", models, "Model paths (.gguf or HF directory), repeatable")->required();
  app.add_option("--threads", threads, "Threads (0: one per core)");
  app.add_option("--prompt-tokens", prompt_tokens, "Prefill prompt length")
      ->check(CLI::PositiveNumber);
  app.add_option("--decode-tokens", decode_tokens, "Decode steps timed per repetition")
      ->check(CLI::PositiveNumber);
  app.add_option("--reps", reps,
                 "Repetitions, each after its own probes; the shares are their median")
      ->check(CLI::PositiveNumber);
  app.add_flag("--no-mmap", no_mmap,
               "Copy the weights into anonymous huge-page memory instead of mapping the files");
  app.add_option("--quant-activations", quant_activations,
                 "How quantized weights meet activations, as the engine's flag: int8 "
                 "(llama.cpp's numerics) or f32 (exact)")
      ->check(CLI::IsMember({"f32", "int8"}))
      ->capture_default_str();
  app.add_flag("--quick", quick, "One repetition, 8 decode steps (a smoke run)");
  app.add_option("--kv-cache-dtype", kv_dtype, "KV cache element type, as the engine's flag")
      ->check(CLI::IsMember({"bf16", "f32"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    reps = 1;
    decode_tokens = 8;
  }

  baton::ThreadPool pool(threads);
  std::printf("engine_bench: %d threads, %s kernels, weights %s, %s KV cache, %s activations\n",
              pool.num_threads(), baton::cpu::ActiveIsa(),
              no_mmap ? "copied (--no-mmap)" : "memory-mapped", kv_dtype.c_str(),
              quant_activations.c_str());
  baton::bench::ReadProbe read_probe(&pool, size_t{1} << 30);
  const baton::Probes probes{&pool, quick ? 1 : 3, &read_probe};
  std::vector<baton::Result> results;
  results.reserve(models.size());
  for (const std::string& path : models) {
    results.push_back(baton::BenchModel(path, &pool, probes, prompt_tokens, decode_tokens, reps,
                                        !no_mmap, kv_dtype, quant_activations == "int8"));
  }
  using baton::Median;
  std::printf(
      "%% bound: each decode step against a streaming read of the same bytes (all threads, 2 MiB\n"
      "pages) timed right after it: median of the steps [10th-90th percentile]; GB/s: those\n"
      "reads. %% peak: each repetition against the best 64 MiB window of a probe run before it,\n"
      "median. %% GEMM: each prefill against a bf16 GEMM 512x2048x2048 run before it, median\n"
      "[lowest-highest]. 2MiB: share of the weights on 2 MiB pages\n");
  std::printf("%-16s %-5s %5s %12s %6s %20s %7s %6s %11s %7s %20s\n", "model", "dtype", "2MiB",
              "decode tok/s", "GB/s", "% bound", "% peak", "prompt", "prefill t/s", "GFLOP/s",
              "% GEMM");
  for (auto& r : results) {
    auto range = [](std::vector<double> v, double lo, double hi) {
      std::sort(v.begin(), v.end());
      const auto at = [&v](double q) {
        return v[static_cast<size_t>(std::lround(q * static_cast<double>(v.size() - 1)))];
      };
      char buf[64];
      std::snprintf(buf, sizeof buf, "%5.1f%% [%.1f-%.1f]", 100.0 * Median(v), 100.0 * at(lo),
                    100.0 * at(hi));
      return std::string(buf);
    };
    std::printf("%-16s %-5s %4.0f%% %12.1f %6.1f %20s %6.1f%% %6d %11.1f %7.0f %20s\n",
                r.name.c_str(), r.dtype.c_str(), 100.0 * r.huge_page_share, r.decode_tok_s,
                Median(r.bandwidth), range(r.decode_share, 0.1, 0.9).c_str(),
                100.0 * Median(r.decode_peak_share), r.prompt_tokens, r.prefill_tok_s,
                Median(r.gemm), range(r.prefill_share, 0, 1).c_str());
  }
  return 0;
}
