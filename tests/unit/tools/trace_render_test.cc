// The text form of `baton trace`: every section a reader looks for, with the figures of
// the trace it was given, and nothing invented when fields are missing.
#include "tools/trace_render.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace baton::tools {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;

Json Step(double start, bool prefill, int64_t context, int64_t kv_bytes, bool sampled,
          const std::string& text) {
  Json s = {
      {"start_seconds", start},     {"forward_seconds", 0.002},  {"sample_seconds", 0.0001},
      {"kv_wait_seconds", 0.0},     {"batch_sequences", 3},      {"batch_tokens", prefill ? 40 : 3},
      {"tokens", prefill ? 37 : 1}, {"context_tokens", context}, {"prefill", prefill},
      {"kv_bytes", kv_bytes},       {"sampled", sampled},        {"layer_groups", Json::array()},
      {"top", Json::array()}};
  if (sampled) {
    s["chosen"] = {{"id", 11}, {"text", text}, {"logprob", -0.105}};  // 90.0%
    s["top"] = Json::array({{{"id", 11}, {"text", text}, {"logprob", -0.105}},
                            {{"id", 12}, {"text", "\nnext"}, {"logprob", -2.99}}});
  }
  return s;
}

Json Sample() {
  Json t;
  t["model"] = "baton-tiny";
  t["prompt_tokens"] = Json::array({{{"id", 1}, {"text", "<s>"}, {"special", true}},
                                    {{"id", 9038}, {"text", "Once"}, {"special", false}},
                                    {{"id", 2501}, {"text", " upon"}, {"special", false}}});
  t["cached_tokens"] = 2;
  t["route"] = {{"policy", "baton"},
                {"route_seconds", 0.00012},
                {"prefill_worker", "127.0.0.1:4001"},
                {"decode_worker", "127.0.0.1:4002"},
                {"expected_cached_tokens", 2},
                {"candidates", Json::array({{{"worker", "127.0.0.1:4001"},
                                             {"role", "prefill"},
                                             {"running", 0},
                                             {"kv_usage", 0.25},
                                             {"cached_tokens", 2},
                                             {"cost_seconds", 0.004},
                                             {"chosen", true}},
                                            {{"worker", "127.0.0.1:4002"},
                                             {"role", "decode"},
                                             {"running", 1},
                                             {"kv_usage", -1.0},
                                             {"chosen", true}}})}};
  Json group = {{"first_layer", 0}, {"layers", 3}, {"done_seconds", 0.001}, {"kv_bytes", 4608}};
  Json chunk = Step(0.001, true, 3, 4608, true, " a");
  chunk["layer_groups"] = Json::array({group});
  t["prefill"] = {{"worker", "127.0.0.1:4001"},
                  {"call_seconds", 0.01},
                  {"compute_seconds", 0.003},
                  {"transfer_seconds", 0.0015},
                  {"exposed_transfer_seconds", 0.0004},
                  {"kv_bytes_sent", 4608},
                  {"blocks_sent", 1},
                  {"steps", Json::array({chunk})}};
  t["worker"] = "127.0.0.1:4002";
  t["steps"] = Json::array({Step(0.012, false, 4, 6144, true, " time")});
  t["weight_bytes"] = 2690304;
  t["kv_bytes_per_token"] = 1536;
  t["num_layers"] = 6;
  t["time_to_first_token_seconds"] = 0.0105;
  t["time_per_output_token_seconds"] = 0.0021;
  t["total_seconds"] = 0.0126;
  t["completion_tokens"] = 2;
  t["temperature"] = 0.0;
  return {{"text", " a time"},
          {"finish_reason", "length"},
          {"usage", {{"prompt_tokens", 3}, {"completion_tokens", 2}}},
          {"trace", t}};
}

TEST(TraceRender, EverySectionWithItsFigures) {
  const std::string out = RenderTrace(Sample());
  // Header and prompt: the cached boundary, specials in <>, ids.
  EXPECT_THAT(
      out, HasSubstr("model baton-tiny; 3 prompt tokens (2 cached), 2 generated, finish length"));
  EXPECT_THAT(out, HasSubstr("<s>:1 'Once':9038 | ' upon':2501"));
  // Route: both workers chosen, the unknown KV usage shown as '?', expected vs found.
  EXPECT_THAT(out, HasSubstr("route: policy baton, decided in 0.12 ms"));
  EXPECT_THAT(out, HasSubstr("* 127.0.0.1:4001"));
  EXPECT_THAT(out, HasSubstr("25.0%"));
  EXPECT_THAT(out, HasSubstr("cached tokens expected 2, found 2"));
  // Prefill leg: transfer and exposed transfer, bytes, the layer group.
  EXPECT_THAT(out, HasSubstr("prefill on 127.0.0.1:4001"));
  EXPECT_THAT(out, HasSubstr("KV transfer 1.50 ms (exposed 0.40 ms), 4.5 KiB in 1 blocks"));
  EXPECT_THAT(out, HasSubstr("0-2: +1.00 ms 4.5 KiB"));
  EXPECT_THAT(out, HasSubstr("chunk of 37 prompt tokens -> ' a' (90.0%)"));
  // Decode: the token, its probability, the alternative with its newline escaped.
  EXPECT_THAT(out, HasSubstr("decode on 127.0.0.1:4002"));
  EXPECT_THAT(out, HasSubstr("-> ' time' (90.0%)  '\\nnext' 5.0%"));
  // Memory: 2690304 / 1536 = 1751.5 -> the cache passes the weights at 1752 tokens.
  EXPECT_THAT(out, HasSubstr("KV 1.5 KiB per token"));
  EXPECT_THAT(out, HasSubstr("overtakes the weights at 1752 tokens"));
  EXPECT_THAT(out, Not(HasSubstr("this request passed it")));
  EXPECT_THAT(out, HasSubstr("TTFT 10.5 ms, TPOT 2.10 ms, end to end 12.6 ms, 2 tokens"));
}

TEST(TraceRender, MissingFieldsReadAsEmpty) {
  const std::string out = RenderTrace(Json{{"text", "x"}});
  EXPECT_THAT(out, HasSubstr("prefill: on the decode worker (no split)"));
  EXPECT_THAT(out, HasSubstr("0 steps"));
  EXPECT_THAT(out, Not(HasSubstr("overtakes")));  // no KV size: no crossover to state
}

TEST(TraceRender, SpecialTokensInBrackets) {
  Json r = Sample();
  r["trace"]["prompt_tokens"][0]["text"] = "bos";
  EXPECT_THAT(RenderTrace(r), HasSubstr("<bos>:1 'Once'"));
}

TEST(TraceRender, ControlBytesAreEscaped) {
  Json r = Sample();
  r["trace"]["prompt_tokens"][1]["text"] = std::string("a\x01'b");
  EXPECT_THAT(RenderTrace(r), HasSubstr("'a\\x01\\'b':9038"));
}

TEST(TraceRender, Formats) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(2690304), "2.6 MiB");
  EXPECT_EQ(FormatSeconds(0.00042), "0.42 ms");
  EXPECT_EQ(FormatSeconds(0.0123), "12.3 ms");
  EXPECT_EQ(FormatSeconds(1.25), "1.25 s");
  EXPECT_EQ(KvOvertakesWeightsAt(3072, 1536), 2);
  EXPECT_EQ(KvOvertakesWeightsAt(3073, 1536), 3);
  EXPECT_EQ(KvOvertakesWeightsAt(100, 0), -1);
}

}  // namespace
}  // namespace baton::tools
