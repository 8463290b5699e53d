// Loading one rank's shard: each slice equals the same rows or columns of the whole
// model, and a rank's resident memory is about its shard, not the model.
#include "model/shard.h"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "modelgen/synthetic_model.h"
#include "tests/unit/model/model_test_util.h"

namespace baton::model {
namespace {

using modelgen::SyntheticModelSpec;
using modelgen::SyntheticShape;
using modelgen::WriteSyntheticModel;

using testing::TempDir;

// Resident bytes of this process (VmRSS).
// From smaps_rollup, which walks the page tables: /proc/self/status's VmRSS is kept per
// thread and folded in lazily, so it can lag by tens of pages per thread.
int64_t ResidentBytes() {
  std::ifstream status("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Rss:", 0) == 0) return std::stoll(line.substr(4)) * 1024;
  }
  return -1;
}

ModelConfig Shape() {
  ModelConfig c = *SyntheticShape("tiny");
  c.hidden_size = 512;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.head_dim = 64;
  c.intermediate_size = 1536;
  c.num_layers = 6;
  c.vocab_size = 8192;
  return c;
}

const std::string& ModelDir() {
  static TempDir* dir = new TempDir();
  static bool written = [] {
    SyntheticModelSpec spec;
    spec.config = Shape();
    spec.seed = 3;
    spec.write_gguf = false;
    EXPECT_TRUE(WriteSyntheticModel(spec, dir->path()).ok());
    return true;
  }();
  (void)written;
  static std::string path = dir->path();
  return path;
}

bool SameRow(const cpu::MatrixRef& a, int64_t ra, int64_t ca, const cpu::MatrixRef& b, int64_t rb,
             int64_t cols) {
  const size_t rowa = cpu::RowBytes(a.dtype, a.cols), rowb = cpu::RowBytes(b.dtype, b.cols);
  return std::memcmp(static_cast<const uint8_t*>(a.data) + rowa * ra + cpu::RowBytes(a.dtype, ca),
                     static_cast<const uint8_t*>(b.data) + rowb * rb,
                     cpu::RowBytes(a.dtype, cols)) == 0;
}

TEST(ShardTest, SlicesAreTheWholeModelsRowsAndColumns) {
  auto full = Model::Open(ModelDir());
  ASSERT_TRUE(full.ok()) << full.status();
  const ModelConfig& c = (*full)->config();
  for (int tp_rank = 0; tp_rank < 2; ++tp_rank) {
    auto plan = PlanShard(c, {tp_rank, 2, 1, 2});
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->layer_begin, 3);
    EXPECT_EQ(plan->layer_end, 6);
    auto shard = ShardModel(**full, *plan);
    ASSERT_TRUE(shard.ok()) << shard.status();
    const Weights& w = (*shard)->weights();
    const Weights& f = (*full)->weights();
    EXPECT_EQ(w.layers[0].q.weight.data, nullptr);  // stage 0's layer: not held
    const LayerWeights& l = w.layers[4];
    const int64_t hd = c.head_dim;
    EXPECT_EQ(l.q.weight.rows, 4 * hd);
    EXPECT_EQ(l.k.weight.rows, 2 * hd);
    EXPECT_EQ(l.o.weight.cols, 4 * hd);
    EXPECT_EQ(l.down.weight.cols, 768);
    EXPECT_TRUE(
        SameRow(f.layers[4].q.weight, tp_rank * 4 * hd + 5, 0, l.q.weight, 5, c.hidden_size));
    EXPECT_TRUE(
        SameRow(f.layers[4].k.weight, tp_rank * 2 * hd + 1, 0, l.k.weight, 1, c.hidden_size));
    EXPECT_TRUE(SameRow(f.layers[4].o.weight, 17, tp_rank * 4 * hd, l.o.weight, 17, 4 * hd));
    EXPECT_TRUE(SameRow(f.layers[4].down.weight, 9, tp_rank * 768, l.down.weight, 9, 768));
    EXPECT_TRUE(SameRow(f.lm_head, tp_rank * 4096 + 7, 0, w.lm_head, 7, c.hidden_size));
    EXPECT_EQ(w.embedding.data, nullptr);  // the last stage does not embed
  }
}

// GCC defines __SANITIZE_ADDRESS__ under ASan; clang 14 answers __has_feature instead.
#if defined(__SANITIZE_ADDRESS__)
#define BATON_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BATON_UNDER_ASAN 1
#endif
#endif

// A rank that opens its shard holds about its share of the weights: the copy of its
// slices, and none of the mapped file once the whole model is closed.
TEST(ShardTest, ResidentMemoryIsAboutTheShard) {
#if defined(BATON_UNDER_ASAN)
  GTEST_SKIP() << "under ASan the heap's redzones and shadow memory grow the resident set "
                  "past the data (measured: 34.5 MiB for a 26 MiB shard); the release build "
                  "checks this";
#endif
  const std::string& dir = ModelDir();
  uint64_t full_bytes = 0;
  {
    OpenOptions lazy;
    lazy.prefault = false;
    auto full = Model::Open(dir, lazy);
    ASSERT_TRUE(full.ok());
    full_bytes = (*full)->weight_bytes();
  }
  const int64_t before = ResidentBytes();
  auto shard = OpenShard(dir, {1, 2, 0, 1});
  ASSERT_TRUE(shard.ok()) << shard.status();
  const int64_t after = ResidentBytes();
  const double shard_bytes = static_cast<double>((*shard)->weight_bytes());
  std::printf("  whole model %.1f MiB, rank 1 of tp=2 holds %.1f MiB, resident grew %.1f MiB\n",
              full_bytes / 1048576.0, shard_bytes / 1048576.0, (after - before) / 1048576.0);
  EXPECT_NEAR(shard_bytes / static_cast<double>(full_bytes), 0.5, 0.02);
  EXPECT_LT(static_cast<double>(after - before), shard_bytes * 1.1 + 4.0 * 1048576);
  EXPECT_GT(static_cast<double>(after - before), shard_bytes * 0.8);
}

}  // namespace
}  // namespace baton::model
