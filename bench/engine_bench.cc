// The CPU engine's speed against this machine's own limits, measured in the same run:
//   decode (batch 1): bytes each token must read (every weight matrix plus the KV cache)
//     over the measured streaming-read bandwidth gives a bound; we report the share of it
//     that we reach.
//   prefill (one 512-token prompt): the forward's FLOPs per second over the GEMM probe
//     (the matmul kernel alone on a large problem).
// Absolute times on a shared machine mean little; these ratios are the figures.
//
//   engine_bench --model models/baton-tiny --model build/bench-models/smollm2-135m
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/cpu_probes.h"
#include "common/thread_pool.h"
#include "engine/kv_pool.h"
#include "engine/model_runner.h"
#include "kernels/cpu/matmul.h"
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
  int prompt_tokens = 0;
  double decode_tok_s = 0;
  double decode_bytes = 0;  // read per decode step: matrices + mean KV cache
  double prefill_tok_s = 0, prefill_gflops = 0;
};

Result BenchModel(const std::string& path, ThreadPool* threads, int prompt_tokens,
                  int decode_tokens, int reps, bool use_mmap) {
  model::OpenOptions options;
  options.use_mmap = use_mmap;
  auto opened = model::Model::Open(path, options);
  if (!opened.ok()) {
    std::fprintf(stderr, "engine_bench: %s\n", std::string(opened.status().message()).c_str());
    std::exit(1);
  }
  const model::Model& m = **opened;
  const auto& cfg = m.config();
  // A model with a short context (baton-tiny: 512) gets a prompt that leaves room for the
  // decode steps.
  prompt_tokens = static_cast<int>(
      std::min<int64_t>(prompt_tokens, cfg.max_position_embeddings - decode_tokens));
  const int64_t capacity = prompt_tokens + decode_tokens + 16;
  auto pool = *engine::KvPool::Create(engine::KvLayoutFor(cfg, 16), (capacity + 15) / 16);
  std::vector<int32_t> blocks;
  while (pool->num_free_blocks() > 0) blocks.push_back(*pool->Allocate());
  engine::ModelRunner runner(m, pool.get(), threads);

  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(cfg.vocab_size - 1));
  std::vector<int32_t> prompt(prompt_tokens);
  for (int32_t& t : prompt) t = token(rng);

  engine::ForwardOutput out;
  double best_prefill = 1e30;
  for (int r = 0; r < reps; ++r) {
    const engine::SequenceInput in{prompt, 0, blocks, engine::LogitsWanted::kLast};
    const auto t0 = Clock::now();
    Check(runner.Forward(std::span(&in, 1), &out));
    best_prefill = std::min(best_prefill, Since(t0));
  }

  // Decode after the prompt: each step reads every matrix once and the KV cache so far.
  std::vector<int32_t> tokens = prompt;
  double best_decode = 1e30;
  for (int r = 0; r < reps; ++r) {
    tokens.resize(prompt_tokens);
    const auto t0 = Clock::now();
    for (int i = 0; i < decode_tokens; ++i) {
      const int32_t next = static_cast<int32_t>(
          std::max_element(out.logits.begin(), out.logits.end()) - out.logits.begin());
      tokens.push_back(next);
      const engine::SequenceInput in{std::span(tokens).last(1),
                                     static_cast<int64_t>(tokens.size()) - 1, blocks,
                                     engine::LogitsWanted::kLast};
      Check(runner.Forward(std::span(&in, 1), &out));
    }
    best_decode = std::min(best_decode, Since(t0) / decode_tokens);
  }

  const ModelCost cost = Cost(m);
  const double kv_bytes_per_pos =
      2.0 * static_cast<double>(cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * sizeof(float));
  const double mean_context = prompt_tokens + decode_tokens / 2.0;
  Result res;
  res.name = cfg.name.empty() ? path : cfg.name;
  res.dtype = cpu::DTypeName(m.weights().layers[0].q.weight.dtype);
  res.decode_tok_s = 1.0 / best_decode;
  res.decode_bytes = static_cast<double>(cost.weight_bytes) + kv_bytes_per_pos * mean_context;
  res.prompt_tokens = prompt_tokens;
  res.prefill_tok_s = prompt_tokens / best_prefill;
  const double attention_flops =
      4.0 * static_cast<double>(cfg.num_layers * cfg.num_heads * cfg.head_dim) *
      (static_cast<double>(prompt_tokens) * (prompt_tokens + 1) / 2);
  res.prefill_gflops = (cost.flops_per_token * prompt_tokens + cost.head_flops + attention_flops) /
                       best_prefill / 1e9;
  return res;
}

}  // namespace
}  // namespace baton

int main(int argc, char** argv) {
  CLI::App app{"CPU engine benchmark: decode vs memory bandwidth, prefill vs the GEMM probe"};
  std::vector<std::string> models;
  int threads = 0, prompt_tokens = 512, decode_tokens = 32, reps = 3;
  bool quick = false, no_mmap = false;
  app.add_option("--model", models, "Model paths (.gguf or HF directory), repeatable")->required();
  app.add_option("--threads", threads, "Threads (0: one per core)");
  app.add_option("--prompt-tokens", prompt_tokens, "Prefill prompt length")
      ->check(CLI::PositiveNumber);
  app.add_option("--decode-tokens", decode_tokens, "Decode steps timed per repetition")
      ->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "Repetitions; the best is kept")->check(CLI::PositiveNumber);
  app.add_flag("--no-mmap", no_mmap,
               "Copy the weights into anonymous huge-page memory instead of mapping the files");
  app.add_flag("--quick", quick, "One repetition, 8 decode steps (a smoke run)");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    reps = 1;
    decode_tokens = 8;
  }

  baton::ThreadPool pool(threads);
  std::printf("engine_bench: %d threads, %s kernels, weights %s\n", pool.num_threads(),
              baton::cpu::ActiveIsa(), no_mmap ? "copied (--no-mmap)" : "memory-mapped");
  std::vector<baton::Result> results;
  for (const std::string& path : models) {
    results.push_back(baton::BenchModel(path, &pool, prompt_tokens, decode_tokens, reps, !no_mmap));
  }
  // Probes after the models, so the models' pages were hot in the same conditions.
  const double bandwidth =
      baton::bench::MeasureReadBandwidthGBs(&pool, size_t{1} << 30, quick ? 2 : 5);
  const double gemm = baton::bench::MeasureGemmGflops(&pool, baton::cpu::DType::kBF16, 512, 2048,
                                                      2048, quick ? 1 : 3);
  std::printf("probes: streaming read %.1f GB/s; bf16 GEMM (512x2048x2048) %.1f GFLOP/s\n",
              bandwidth, gemm);
  std::printf("%-16s %-5s %12s %12s %9s %7s %12s %10s %8s\n", "model", "dtype", "decode tok/s",
              "bound tok/s", "% bound", "prompt", "prefill t/s", "GFLOP/s", "% GEMM");
  for (auto& r : results) {
    const double bound = bandwidth * 1e9 / r.decode_bytes;
    std::printf("%-16s %-5s %12.1f %12.1f %8.1f%% %7d %12.1f %10.1f %7.1f%%\n", r.name.c_str(),
                r.dtype.c_str(), r.decode_tok_s, bound, 100.0 * r.decode_tok_s / bound,
                r.prompt_tokens, r.prefill_tok_s, r.prefill_gflops,
                100.0 * r.prefill_gflops / gemm);
  }
  return 0;
}
