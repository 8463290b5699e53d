// GPU sampling against the CPU sampler (engine/sampler.h) on the same logits: processors
// bit for bit, greedy ids equal, over a batch with NaNs, ties and every processor. Skipped
// without a GPU.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/sampler.h"
#include "gtest/gtest.h"
#include "kernels/cuda/sampling.cuh"
#include "kernels/logit_processors.h"
#include "tests/gpu/gpu_test_util.h"

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

}  // namespace
}  // namespace baton::kernels::cuda
