// The KV cache's element type (EngineOptions::kv_cache_dtype, --kv-cache-dtype): what a
// bf16 page holds against an f32 page of the same forward, the sizes, and the refusals.
// The numerics of attention over bf16 pages are in tests/unit/kernels/attention_test.cc,
// the rounding in tests/unit/kernels/bf16_test.cc, the whole model in
// reference_forward_test.cc and stories_reference_test.cc.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/generator.h"
#include "engine/loaded_model.h"
#include "engine/model_runner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/bf16.h"
#include "kvcache/kv_pool.h"
#include "tests/unit/engine/test_models.h"

namespace baton::engine {
namespace {

using ::testing::HasSubstr;

const LoadedModel& Tiny() { return testing::BatonTiny(); }

// A prompt through one forward on pages of `dtype`; the pool, with the prompt's pages
// 0, 1, 2 in that order.
std::unique_ptr<kvcache::KvPool> RunPrompt(const std::string& dtype,
                                           const std::vector<int32_t>& prompt) {
  const model::Model& m = *Tiny().model;
  auto pool = kvcache::KvPool::Create(PageLayoutFor(m.config(), 16, dtype), 3);
  EXPECT_TRUE(pool.ok()) << pool.status();
  std::vector<int32_t> blocks;
  while ((*pool)->num_free_blocks() > 0) blocks.push_back(*(*pool)->Allocate());
  ThreadPool threads(2);
  ModelRunner runner(m, pool->get(), &threads);
  ForwardOutput out;
  const SequenceInput in{prompt, 0, blocks, LogitsWanted::kLast};
  EXPECT_TRUE(runner.Forward(std::span(&in, 1), &out).ok());
  return std::move(*pool);
}

// Layer 0's K and V do not depend on attention, so both forwards compute the same f32
// values there: the bf16 pages must hold exactly those values rounded to nearest even,
// at every position, head and dimension, and nothing past the prompt.
TEST(KvDtypeTest, Bf16PagesHoldTheF32PagesRoundedToNearestEven) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 37; ++i) prompt.push_back(5 + (i * 53) % 1200);
  const auto f32 = RunPrompt("f32", prompt);
  const auto bf16 = RunPrompt("bf16", prompt);
  const kvcache::PageLayout& l = f32->layout();
  int64_t compared = 0, inexact = 0;
  for (int64_t pos = 0; pos < 48; ++pos) {
    const int32_t page = static_cast<int32_t>(pos / l.block_size);
    for (int64_t head = 0; head < l.num_kv_heads; ++head) {
      for (int64_t half = 0; half < 2; ++half) {
        const int64_t at = l.element_offset(0, head, half, pos % l.block_size);
        const auto* want = reinterpret_cast<const float*>(f32->block_data(page)) + at;
        const auto* got = reinterpret_cast<const cpu::Bf16*>(bf16->block_data(page)) + at;
        for (int64_t d = 0; d < l.head_dim; ++d) {
          if (pos >= static_cast<int64_t>(prompt.size())) {
            ASSERT_EQ(got[d].bits, 0) << "a position past the prompt was written";
            continue;
          }
          ASSERT_EQ(got[d].bits, cpu::FloatToBf16(want[d]).bits)
              << "position " << pos << " head " << head << (half ? " V" : " K") << " dim " << d;
          inexact += cpu::Bf16ToFloat(got[d]) != want[d];
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 37 * l.num_kv_heads * 2 * l.head_dim);
  EXPECT_GT(inexact, compared / 2) << "the f32 values were not already bf16: rounding happened";
}

TEST(KvDtypeTest, ABf16PageIsHalfAnF32PageSoABudgetHoldsTwiceThePages) {
  const LoadedModel& m = Tiny();
  const kvcache::PageLayout f32 = PageLayoutFor(m.model->config(), 16, "f32");
  const kvcache::PageLayout bf16 = PageLayoutFor(m.model->config(), 16, "bf16");
  EXPECT_EQ(2 * bf16.page_bytes(), f32.page_bytes());
  EngineOptions o;
  o.threads = 1;
  o.kv_cache_bytes = 10 * f32.page_bytes();
  o.kv_cache_dtype = "f32";
  auto a = Engine::Create(&m, o);
  o.kv_cache_dtype = "bf16";
  auto b = Engine::Create(&m, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->num_kv_pages(), 10);
  EXPECT_EQ((*b)->num_kv_pages(), 20);
  EXPECT_EQ((*a)->kv_layout().dtype, "f32");
  EXPECT_EQ((*b)->kv_layout().dtype, "bf16");
  EXPECT_EQ((*b)->kv_pool_bytes(), 20 * bf16.page_bytes());
}

TEST(KvDtypeTest, OtherDtypesAreRefusedNamingTheFlagAndTheChoices) {
  const LoadedModel& m = Tiny();
  ThreadPool threads(1);
  for (const std::string bad : {"f16", "fp8", "", "BF16", "float32"}) {
    SCOPED_TRACE("'" + bad + "'");
    const absl::Status check = kvcache::CheckKvCacheDtype(bad);
    EXPECT_EQ(check.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(check.message(), HasSubstr("--kv-cache-dtype"));
    EXPECT_THAT(check.message(), HasSubstr("bf16 or f32"));

    EngineOptions o;
    o.kv_cache_bytes = 1 << 20;
    o.kv_cache_dtype = bad;
    EXPECT_EQ(Engine::Create(&m, o).status(), check);

    GenerateOptions g;
    g.kv_cache_dtype = bad;
    SamplingParams p;
    p.max_tokens = 2;
    EXPECT_EQ(Generate(m, &threads, {5, 6}, p, g, nullptr).status(), check);

    kvcache::PageLayout l = PageLayoutFor(m.model->config(), 16, "bf16");
    l.dtype = bad;
    EXPECT_EQ(kvcache::KvPool::Create(l, 4).status(), check);
  }
  EXPECT_TRUE(kvcache::CheckKvCacheDtype("bf16").ok());
  EXPECT_TRUE(kvcache::CheckKvCacheDtype("f32").ok());
}

}  // namespace
}  // namespace baton::engine
