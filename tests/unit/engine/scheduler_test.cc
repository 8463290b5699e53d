#include "engine/scheduler.h"

// The tables name only the fields a row needs; the rest are empty on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::engine {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

struct NewSeq {
  uint64_t id;
  int64_t prompt_len;
  int64_t max_len;
  int priority = 0;
  int32_t first_token = 100;  // prompt tokens are first_token, first_token+1, ...
};

// One row of a table: what happens before the step, and what the step must plan.
struct StepRow {
  std::vector<uint64_t> finish_before;              // finished (or cancelled) before this step
  std::vector<NewSeq> add;                          // submitted after those, before this step
  std::vector<std::pair<uint64_t, int64_t>> items;  // (id, tokens), in plan order
  std::vector<uint64_t> preempted;
  std::vector<uint64_t> running;  // after the step, in priority order
  std::vector<uint64_t> waiting;  // after the step, in admission order
};

struct Table {
  std::string name;
  SchedulerConfig config;
  int64_t pages;
  bool prefix_cache;
  std::vector<StepRow> steps;
};

std::vector<int32_t> Tokens(const NewSeq& s) {
  std::vector<int32_t> t(s.prompt_len);
  std::iota(t.begin(), t.end(), s.first_token);
  return t;
}

std::unique_ptr<Sequence> MakeSeq(const NewSeq& n, int64_t block_size) {
  auto s = std::make_unique<Sequence>();
  s->id = n.id;
  s->priority = n.priority;
  s->root = kvcache::NamespaceHash({"m", "", ""}, block_size);
  s->tokens = Tokens(n);
  s->prompt_len = n.prompt_len;
  s->max_len = n.max_len;
  return s;
}

void RunTable(const Table& t) {
  SCOPED_TRACE(t.name);
  kvcache::BlockManager blocks(t.pages, t.prefix_cache, nullptr);
  Scheduler sched(t.config, &blocks);
  for (size_t step = 0; step < t.steps.size(); ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step + 1);
    const StepRow& row = t.steps[step];
    for (uint64_t id : row.finish_before) ASSERT_NE(sched.Finish(id), nullptr);
    for (const NewSeq& n : row.add) ASSERT_TRUE(sched.Add(MakeSeq(n, t.config.block_size)).ok());
    StepPlan plan = sched.Schedule();
    std::vector<std::pair<uint64_t, int64_t>> items;
    for (const StepItem& item : plan.items) {
      items.emplace_back(item.seq->id, item.num_tokens);
      // Invariants of every item: the pages cover what it computes, and logits are
      // wanted exactly when it reaches the last known token.
      EXPECT_GE(static_cast<int64_t>(item.seq->block_table.size()) * t.config.block_size,
                item.start + item.num_tokens);
      EXPECT_EQ(item.wants_logits,
                item.start + item.num_tokens == static_cast<int64_t>(item.seq->tokens.size()));
    }
    EXPECT_THAT(items, ElementsAreArray(row.items));
    EXPECT_THAT(plan.preempted, ElementsAreArray(row.preempted));
    EXPECT_LE(plan.num_tokens, t.config.max_batched_tokens);
    // Every wanted logit row samples token 7.
    std::vector<std::optional<int32_t>> sampled;
    for (const StepItem& item : plan.items) {
      sampled.push_back(item.wants_logits ? std::optional<int32_t>(7) : std::nullopt);
    }
    sched.Commit(plan, sampled);
    EXPECT_THAT(sched.running_ids(), ElementsAreArray(row.running));
    EXPECT_THAT(sched.waiting_ids(), ElementsAreArray(row.waiting));
  }
  // Finishing everything frees every page.
  for (uint64_t id : sched.running_ids()) sched.Finish(id);
  for (uint64_t id : sched.waiting_ids()) sched.Finish(id);
  EXPECT_EQ(blocks.num_in_use(), 0);
  EXPECT_EQ(blocks.num_available(), t.pages);
}

SchedulerConfig Config(int64_t block_size, int64_t max_running, int64_t budget, int64_t chunk) {
  SchedulerConfig c;
  c.block_size = block_size;
  c.max_running = max_running;
  c.max_waiting = 16;
  c.max_batched_tokens = budget;
  c.max_prefill_chunk = chunk;
  c.max_model_len = 1024;
  return c;
}

TEST(SchedulerTest, ChunkedPrefillThenDecode) {
  RunTable({"chunked prefill",
            Config(4, 4, 8, 8),
            16,
            false,
            {
                {.add = {{1, 20, 30}}, .items = {{1, 8}}, .running = {1}},
                {.items = {{1, 8}}, .running = {1}},
                {.items = {{1, 4}}, .running = {1}},  // the last chunk samples
                {.items = {{1, 1}}, .running = {1}},  // decode
            }});
}

TEST(SchedulerTest, DecodesGoFirstAndALongPromptGetsWhatIsLeft) {
  RunTable({"decodes first",
            Config(4, 4, 8, 64),
            32,
            false,
            {
                {.add = {{1, 3, 20}}, .items = {{1, 3}}, .running = {1}},
                {.add = {{2, 30, 40}}, .items = {{1, 1}, {2, 7}}, .running = {1, 2}},
                {.add = {{3, 2, 10}}, .items = {{1, 1}, {2, 7}}, .running = {1, 2}, .waiting = {3}},
                {.items = {{1, 1}, {2, 7}}, .running = {1, 2}, .waiting = {3}},
                // Prompt 2 has 9 left: 7 fit; 3 waits behind it (no budget).
                {.items = {{1, 1}, {2, 7}}, .running = {1, 2}, .waiting = {3}},
                {.items = {{1, 1}, {2, 2}, {3, 2}}, .running = {1, 2, 3}},
                {.items = {{1, 1}, {2, 1}, {3, 1}}, .running = {1, 2, 3}},
            }});
}

TEST(SchedulerTest, MaxRunningAndFcfs) {
  RunTable({"max running",
            Config(4, 2, 64, 64),
            32,
            false,
            {
                {.add = {{1, 4, 10}, {2, 4, 10}, {3, 4, 10}},
                 .items = {{1, 4}, {2, 4}},
                 .running = {1, 2},
                 .waiting = {3}},
                {.items = {{1, 1}, {2, 1}}, .running = {1, 2}, .waiting = {3}},
                {.finish_before = {1}, .items = {{2, 1}, {3, 4}}, .running = {2, 3}},
            }});
}

TEST(SchedulerTest, PriorityOrdersTheQueue) {
  RunTable({"priority",
            Config(4, 1, 64, 64),
            32,
            false,
            {
                {.add = {{1, 4, 10}}, .items = {{1, 4}}, .running = {1}},
                {.add = {{2, 4, 10, 0}, {3, 4, 10, -1}},
                 .items = {{1, 1}},
                 .running = {1},
                 .waiting = {3, 2}},
                {.finish_before = {1}, .items = {{3, 4}}, .running = {3}, .waiting = {2}},
            }});
}

// 4 pages of 4 tokens. Two sequences of 6 prompt tokens each take 2 pages; when the
// first needs a third page, the later one is preempted, and it is recomputed (prompt
// plus its generated tokens) once pages are back.
TEST(SchedulerTest, PagesRunOutSoTheLatestIsPreemptedAndRecomputed) {
  RunTable(
      {"preemption",
       Config(4, 4, 64, 64),
       4,
       false,
       {
           {.add = {{1, 6, 14}, {2, 6, 14, 0, 200}}, .items = {{1, 6}, {2, 6}}, .running = {1, 2}},
           {.items = {{1, 1}, {2, 1}}, .running = {1, 2}},  // positions 6
           {.items = {{1, 1}, {2, 1}}, .running = {1, 2}},  // positions 7
           {.items = {{1, 1}}, .preempted = {2}, .running = {1}, .waiting = {2}},
           {.items = {{1, 1}}, .running = {1}, .waiting = {2}},        // 2 needs 3, 1 free
           {.finish_before = {1}, .items = {{2, 9}}, .running = {2}},  // 6 + 3 sampled
           {.items = {{2, 1}}, .running = {2}},
       }});
}

TEST(SchedulerTest, TheLowestPriorityIsPreemptedEvenIfEarlier) {
  RunTable({"preempt by priority",
            Config(4, 4, 64, 64),
            4,
            false,
            {
                // 2 comes first in the queue: priority 0 before 5.
                {.add = {{1, 6, 14, 5}, {2, 6, 14, 0, 200}},
                 .items = {{2, 6}, {1, 6}},
                 .running = {2, 1}},
                {.items = {{2, 1}, {1, 1}}, .running = {2, 1}},
                {.items = {{2, 1}, {1, 1}}, .running = {2, 1}},
                {.items = {{2, 1}}, .preempted = {1}, .running = {2}, .waiting = {1}},
            }});
}

// With the prefix cache, a prompt that shares full blocks with a finished one starts
// after them; an identical prompt still computes its last block (logits need a token).
TEST(SchedulerTest, PrefixCacheSkipsCachedBlocks) {
  RunTable({"prefix cache",
            Config(4, 4, 64, 64),
            16,
            true,
            {
                {.add = {{1, 9, 12}}, .items = {{1, 9}}, .running = {1}},
                {.finish_before = {1}, .add = {{2, 10, 12}}, .items = {{2, 2}}, .running = {2}},
                {.add = {{3, 8, 12}}, .items = {{2, 1}, {3, 4}}, .running = {2, 3}},
            }});
}

TEST(SchedulerTest, AddRefusesWhatCanNeverRunAndAFullQueue) {
  kvcache::BlockManager blocks(4, true, nullptr);
  SchedulerConfig c = Config(4, 4, 64, 64);
  c.max_waiting = 1;
  c.max_model_len = 32;
  Scheduler sched(c, &blocks);
  absl::Status s = sched.Add(MakeSeq({1, 10, 40}, 4));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_model_len (32)"));
  s = sched.Add(MakeSeq({2, 10, 20}, 4));  // 5 pages > 4
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("needs 5 KV pages"));
  ASSERT_TRUE(sched.Add(MakeSeq({3, 4, 8}, 4)).ok());
  s = sched.Add(MakeSeq({4, 4, 8}, 4));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_waiting"));
  EXPECT_EQ(sched.num_waiting(), 1);
}

TEST(SchedulerTest, ConfigIsValidated) {
  SchedulerConfig c = Config(4, 8, 4, 4);
  absl::Status s = ValidateSchedulerConfig(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_batched_tokens"));
  EXPECT_TRUE(ValidateSchedulerConfig(Config(16, 8, 64, 32)).ok());
  EXPECT_FALSE(ValidateSchedulerConfig(Config(0, 8, 64, 32)).ok());
}

}  // namespace
}  // namespace baton::engine
