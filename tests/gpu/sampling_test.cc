// GPU sampling against the CPU sampler (engine/sampler.h) on the same logits: processors
// bit for bit, greedy ids equal, the shared exponential bit for bit, and the sampled ids of
// ProcessAndSampleTokens equal to SequenceSampler::Sample's over rows with NaNs, ties,
// infinities, huge and tiny values and a grid of parameters. Skipped without a GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/sampler.h"
#include "gtest/gtest.h"
#include "kernels/cuda/sampling.cuh"
#include "kernels/logit_processors.h"
#include "kernels/sampling_core.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/engine/sampling_rows.h"

namespace baton::kernels::cuda {
namespace {

using ::baton::testing::Download;
using ::baton::testing::Upload;

TEST(CudaSamplingTest, ProcessorsAndGreedyMatchTheCpuSampler) {
  BATON_SKIP_WITHOUT_GPU();
  const int vocab = 50000;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uni(-10.0f, 10.0f);
  std::vector<engine::SamplingParams> params(5);
  for (auto& p : params) p.temperature = 0;
  params[1].logit_bias = {{7, 30.0f}, {7, -5.0f}, {vocab + 1, 3.0f}};
  params[2].repetition_penalty = 1.7;
  params[3].presence_penalty = 1.1;
  params[3].frequency_penalty = 0.6;
  params[4] = params[1];
  params[4].repetition_penalty = 0.9;
  params[4].frequency_penalty = -1.0;
  const std::vector<int32_t> prompt = {2, 40000, 7, 7, 123};
  const std::vector<int32_t> outputs = {40000, 9, 9, 49999};
  LogitProcessorLists lists;
  std::vector<float> logits(params.size() * vocab);
  for (float& x : logits) x = uni(rng);
  for (size_t s = 0; s < params.size(); ++s) {
    float* row = &logits[s * vocab];
    row[11] = NAN;                // never chosen, never poisons
    row[100] = row[200] = 11.0f;  // a tie above every draw: the lower id wins
    if (s == 0) row[100] = NAN;
  }
  std::vector<int32_t> want_ids;
  std::vector<float> want_logits;
  for (size_t s = 0; s < params.size(); ++s) {
    engine::SequenceSampler sampler(params[s], prompt, /*seed=*/5, outputs);
    sampler.AppendLogitProcessors(&lists);
    const std::span<const float> row(&logits[s * vocab], vocab);
    want_ids.push_back(sampler.Sample(row).id);
    std::vector<float> processed(row.begin(), row.end());
    for (float& x : processed) x = std::isnan(x) ? -INFINITY : x;
    sampler.ApplyLogitProcessors(processed);
    want_logits.insert(want_logits.end(), processed.begin(), processed.end());
  }
  float* d_logits = Upload(logits);
  DeviceLogitProcessors p;
  p.bias_offsets = Upload(lists.bias_offsets);
  p.bias_ids = Upload(lists.bias_ids);
  p.bias_values = Upload(lists.bias_values);
  p.repetition_penalty = Upload(lists.repetition_penalty);
  p.seen_offsets = Upload(lists.seen_offsets);
  p.seen_ids = Upload(lists.seen_ids);
  p.penalty_offsets = Upload(lists.penalty_offsets);
  p.penalty_ids = Upload(lists.penalty_ids);
  p.penalty_values = Upload(lists.penalty_values);
  int32_t* d_ids = Upload(std::vector<int32_t>(params.size(), -1));
  const int n = static_cast<int>(params.size());
  ASSERT_EQ(ProcessLogits(d_logits, vocab, n, p, nullptr), cudaSuccess);
  ASSERT_EQ(GreedyTokens(d_logits, vocab, n, d_ids, nullptr), cudaSuccess);
  const std::vector<float> got_logits = Download(d_logits, logits.size());
  const std::vector<int32_t> got_ids = Download(d_ids, params.size());
  for (size_t i = 0; i < got_logits.size(); ++i) {
    ASSERT_EQ(got_logits[i], want_logits[i]) << "seq " << i / vocab << " id " << i % vocab;
  }
  EXPECT_EQ(got_ids, want_ids);
  EXPECT_EQ(want_ids[0], 200);  // its 100 is NaN
  EXPECT_EQ(want_ids[1], 7);    // biased +25
  for (const void* q :
       {static_cast<const void*>(d_logits), static_cast<const void*>(d_ids),
        static_cast<const void*>(p.bias_offsets), static_cast<const void*>(p.bias_ids),
        static_cast<const void*>(p.bias_values), static_cast<const void*>(p.repetition_penalty),
        static_cast<const void*>(p.seen_offsets), static_cast<const void*>(p.seen_ids),
        static_cast<const void*>(p.penalty_offsets), static_cast<const void*>(p.penalty_ids),
        static_cast<const void*>(p.penalty_values)}) {
    cudaFree(const_cast<void*>(q));
  }
}

uint32_t Bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}

// The choice's exponential gives the host's bits on the device: without this nothing else
// here can agree. Every 61st float of [-104, 0] (the range the choice uses), plus the edges.
TEST(CudaSamplingTest, ExpHasTheHostBits) {
  BATON_SKIP_WITHOUT_GPU();
  std::vector<float> x = {0.0f,     -0.0f,   -INFINITY, INFINITY, NAN,     -104.0f,
                          -103.97f, -103.9f, -87.34f,   -1e-45f,  1e-45f,  -FLT_MIN,
                          88.72f,   88.73f,  89.0f,     89.5f,    -150.0f, -FLT_MAX};
  for (uint32_t b = 0x80000000u; b <= 0xC2D00000u; b += 61) {
    float v;
    std::memcpy(&v, &b, sizeof(v));
    x.push_back(v);
  }
  float* d_x = Upload(x);
  float* d_out = Upload(std::vector<float>(x.size()));
  ASSERT_EQ(SamplingExps(d_x, static_cast<int64_t>(x.size()), d_out, nullptr), cudaSuccess);
  const std::vector<float> got = Download(d_out, x.size());
  size_t mismatches = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = sampling::Exp(x[i]);
    if (Bits(got[i]) == Bits(want) || (std::isnan(got[i]) && std::isnan(want))) continue;
    if (++mismatches <= 10) {
      ADD_FAILURE() << "Exp(" << std::hexfloat << x[i] << "): device " << got[i] << ", host "
                    << want;
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << x.size();
  cudaFree(d_x);
  cudaFree(d_out);
}

// Rows that reach every branch of the choice.
using ::baton::testing::kRowKinds;
using ::baton::testing::MakeRow;
using ::baton::testing::Name;
using ::baton::testing::RowKind;

// One sampled token to compare: a row, the params, and the sequence's state.
struct Case {
  RowKind kind;
  int row;  // index into the vocab's rows
  engine::SamplingParams params;
  std::vector<int32_t> prompt, outputs;  // outputs.size() is the draw's step
  uint64_t seed;
};

std::string Describe(const Case& c) {
  const engine::SamplingParams& p = c.params;
  return std::string(Name(c.kind)) + " T=" + std::to_string(p.temperature) +
         " top_k=" + std::to_string(p.top_k) + " top_p=" + std::to_string(p.top_p) +
         " min_p=" + std::to_string(p.min_p) + (p.repetition_penalty != 1.0 ? " +processors" : "") +
         " seed=" + std::to_string(c.seed) + " step=" + std::to_string(c.outputs.size());
}

// temperature x top_k x top_p x min_p x processors, `draws` (seed, step) pairs each, on
// every row kind.
std::vector<Case> Cases(int vocab, int draws, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Case> cases;
  for (size_t r = 0; r < std::size(kRowKinds); ++r) {
    for (double t : {0.0, 0.3, 1.0, 2.0}) {
      for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{40}, int64_t{vocab - 1}}) {
        for (double top_p : {1.0, 0.9, 0.5, 1e-6}) {
          for (double min_p : {0.0, 0.05}) {
            for (bool processors : {false, true}) {
              for (int d = 0; d < draws; ++d) {
                Case c;
                c.kind = kRowKinds[r];
                c.row = static_cast<int>(r);
                c.params.temperature = t;
                c.params.top_k = k;
                c.params.top_p = top_p;
                c.params.min_p = min_p;
                if (processors) {
                  // Ids 7 and 11 biased (7 twice), one out of the vocabulary; penalties on
                  // the prompt and on the outputs.
                  c.params.logit_bias = {{7, 2.5f}, {11, -100.0f}, {7, 1.5f}, {vocab + 3, 1.0f}};
                  c.params.repetition_penalty = 1.3;
                  c.params.presence_penalty = 0.4;
                  c.params.frequency_penalty = 0.2;
                }
                c.prompt = {1, 5, 5, 9, static_cast<int32_t>(rng() % vocab)};
                const size_t step = rng() % 40;
                for (size_t i = 0; i < step; ++i) {
                  c.outputs.push_back(static_cast<int32_t>(rng() % (i % 3 == 0 ? 16 : vocab)));
                }
                c.seed = rng();
                cases.push_back(std::move(c));
              }
            }
          }
        }
      }
    }
  }
  return cases;
}

void FreeAll(std::initializer_list<const void*> pointers) {
  for (const void* q : pointers) cudaFree(const_cast<void*>(q));
}

// ProcessAndSampleTokens over a batch of cases against SequenceSampler::Sample, case by
// case. Reports each mismatch with what differed first: the draw, the processed row, or
// the choice.
void ExpectSameIds(int vocab, const std::vector<std::vector<float>>& rows,
                   const std::vector<Case>& cases, size_t* mismatches) {
  const int n = static_cast<int>(cases.size());
  LogitProcessorLists lists;
  std::vector<float> logits;
  logits.reserve(static_cast<size_t>(n) * vocab);
  std::vector<sampling::ChoiceParams> params;
  std::vector<uint64_t> seeds, steps;
  std::vector<int32_t> want;
  for (const Case& c : cases) {
    engine::SequenceSampler sampler(c.params, c.prompt, c.seed, c.outputs);
    sampler.AppendLogitProcessors(&lists);
    params.push_back(sampler.choice_params());
    seeds.push_back(sampler.seed());
    steps.push_back(static_cast<uint64_t>(sampler.step()));
    want.push_back(sampler.Sample(rows[c.row]).id);
    logits.insert(logits.end(), rows[c.row].begin(), rows[c.row].end());
  }
  float* d_logits = Upload(logits);
  DeviceLogitProcessors p;
  p.bias_offsets = Upload(lists.bias_offsets);
  p.bias_ids = Upload(lists.bias_ids);
  p.bias_values = Upload(lists.bias_values);
  p.repetition_penalty = Upload(lists.repetition_penalty);
  p.seen_offsets = Upload(lists.seen_offsets);
  p.seen_ids = Upload(lists.seen_ids);
  p.penalty_offsets = Upload(lists.penalty_offsets);
  p.penalty_ids = Upload(lists.penalty_ids);
  p.penalty_values = Upload(lists.penalty_values);
  sampling::ChoiceParams* d_params = Upload(params);
  uint64_t* d_seeds = Upload(seeds);
  uint64_t* d_steps = Upload(steps);
  double* d_uniforms = Upload(std::vector<double>(n));
  int32_t* d_ids = Upload(std::vector<int32_t>(n, -2));
  void* d_scratch = nullptr;
  ASSERT_EQ(cudaMalloc(&d_scratch, SampleTokensScratchBytes(vocab, n)), cudaSuccess);

  ASSERT_EQ(ProcessAndSampleTokens(d_logits, vocab, n, p, d_params, d_seeds, d_steps, d_uniforms,
                                   d_scratch, d_ids, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<int32_t> got = Download(d_ids, n);
  const std::vector<double> uniforms = Download(d_uniforms, n);
  for (int s = 0; s < n; ++s) {
    const Case& c = cases[s];
    ASSERT_EQ(uniforms[s], engine::CounterUniform(seeds[s], steps[s])) << Describe(c);
    if (got[s] == want[s]) continue;
    ++*mismatches;
    if (*mismatches > 20) continue;
    // Which step differs: the processed row, or the choice on equal rows.
    engine::SequenceSampler sampler(c.params, c.prompt, c.seed, c.outputs);
    std::vector<float> processed = rows[c.row];
    for (float& x : processed) x = std::isnan(x) ? -INFINITY : x;
    sampler.ApplyLogitProcessors(processed);
    const std::vector<float> device_row =
        Download(d_logits + static_cast<size_t>(s) * vocab, vocab);
    int first_diff = -1;
    for (int i = 0; i < vocab && first_diff < 0; ++i) {
      if (Bits(device_row[i]) != Bits(processed[i])) first_diff = i;
    }
    ADD_FAILURE() << "vocab " << vocab << " " << Describe(c) << ": GPU chose " << got[s] << ", CPU "
                  << want[s]
                  << (first_diff < 0
                          ? "; the processed rows agree"
                          : "; processed rows first differ at id " + std::to_string(first_diff));
  }
  FreeAll({d_logits, p.bias_offsets, p.bias_ids, p.bias_values, p.repetition_penalty,
           p.seen_offsets, p.seen_ids, p.penalty_offsets, p.penalty_ids, p.penalty_values, d_params,
           d_seeds, d_steps, d_uniforms, d_ids, d_scratch});
}

TEST(CudaSamplingTest, SampledIdsMatchTheCpuSampler) {
  BATON_SKIP_WITHOUT_GPU();
  for (int vocab : {32000, 128256}) {
    std::vector<std::vector<float>> rows;
    for (size_t r = 0; r < std::size(kRowKinds); ++r) {
      rows.push_back(MakeRow(kRowKinds[r], vocab, static_cast<uint32_t>(vocab + r)));
    }
    const std::vector<Case> cases = Cases(vocab, vocab < 100000 ? 4 : 2, /*seed=*/vocab);
    size_t mismatches = 0;
    constexpr size_t kBatch = 256;  // ~650 MB of logits and scratch at vocab 128256
    for (size_t begin = 0; begin < cases.size(); begin += kBatch) {
      const std::vector<Case> batch(cases.begin() + begin,
                                    cases.begin() + std::min(cases.size(), begin + kBatch));
      ExpectSameIds(vocab, rows, batch, &mismatches);
      if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_EQ(mismatches, 0u) << "vocab " << vocab << ": of " << cases.size() << " draws";
    std::printf("vocab %d: %zu draws, %zu differ from the CPU sampler\n", vocab, cases.size(),
                mismatches);
  }
}

// What one SampleTokens call costs at vocab 128256 (printed, not checked): one thread per
// sequence, so a batch costs about what its slowest sequence does until the SMs fill.
TEST(CudaSamplingTest, SampleTokensCost) {
  BATON_SKIP_WITHOUT_GPU();
  const int vocab = 128256;
  const std::vector<float> row = MakeRow(RowKind::kPeaked, vocab, 1);
  struct Config {
    const char* name;
    double temperature, top_p, min_p;
    int64_t top_k;
  };
  for (const Config& config :
       {Config{"T=1", 1.0, 1.0, 0.0, 0}, Config{"T=0.8 top_k=40 top_p=0.95", 0.8, 0.95, 0.0, 40},
        Config{"T=1 top_p=0.9", 1.0, 0.9, 0.0, 0}, Config{"T=1 min_p=0.05", 1.0, 1.0, 0.05, 0}}) {
    for (int n : {1, 64, 256}) {
      sampling::ChoiceParams choice;
      choice.temperature = config.temperature;
      choice.top_k = config.top_k;
      choice.top_p = config.top_p;
      choice.min_p = config.min_p;
      std::vector<float> logits;
      for (int s = 0; s < n; ++s) logits.insert(logits.end(), row.begin(), row.end());
      std::vector<double> uniforms(n);
      for (int s = 0; s < n; ++s) uniforms[s] = engine::CounterUniform(s, 0);
      float* d_logits = Upload(logits);
      sampling::ChoiceParams* d_params = Upload(std::vector<sampling::ChoiceParams>(n, choice));
      double* d_uniforms = Upload(uniforms);
      int32_t* d_ids = Upload(std::vector<int32_t>(n));
      void* d_scratch = nullptr;
      ASSERT_EQ(cudaMalloc(&d_scratch, SampleTokensScratchBytes(vocab, n)), cudaSuccess);
      cudaEvent_t start, stop;
      cudaEventCreate(&start);
      cudaEventCreate(&stop);
      ASSERT_EQ(SampleTokens(d_logits, vocab, n, d_params, d_uniforms, d_scratch, d_ids, nullptr),
                cudaSuccess);  // warm-up
      constexpr int kRuns = 3;
      cudaEventRecord(start);
      for (int i = 0; i < kRuns; ++i) {
        SampleTokens(d_logits, vocab, n, d_params, d_uniforms, d_scratch, d_ids, nullptr);
      }
      cudaEventRecord(stop);
      ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      std::printf("SampleTokens vocab %d, %-26s batch %3d: %8.3f ms\n", vocab, config.name, n,
                  ms / kRuns);
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
      FreeAll({d_logits, d_params, d_uniforms, d_ids, d_scratch});
    }
  }
}

}  // namespace
}  // namespace baton::kernels::cuda
