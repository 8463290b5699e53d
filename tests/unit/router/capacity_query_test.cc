// /inspect/plan's answer (frontdoor/openai/capacity_query.h) against capacity::PlanCapacity
// run directly on the bundled model's shape as its config.json states it
// (tests/unit/capacity/config_shape.h), sent the way a worker's GetModelInfo sends it.
#include "frontdoor/openai/capacity_query.h"

#include <string>

#include "capacity/capacity_plan.h"
#include "capacity/gpu_devices.h"
#include "common/param_error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/capacity/config_shape.h"

namespace baton::frontdoor {
namespace {

namespace pb = ::baton::internal::v1;
using ::testing::HasSubstr;

void SetGroup(const capacity::TensorGroup& g, pb::TensorGroup* out) {
  out->set_bytes(g.bytes);
  out->set_elements(g.elements);
}

// What a worker serving the bundled model with an f32 cache and a 256-token limit reports.
pb::GetModelInfoResponse TinyInfo() {
  const capacity::testing::Shape s = capacity::testing::TinyShape();
  pb::GetModelInfoResponse info;
  info.set_model_id("baton-tiny");
  info.set_max_model_len(256);
  info.set_kv_cache_dtype("f32");
  info.set_weight_dtype("bf16");
  pb::ModelShape* shape = info.mutable_shape();
  shape->set_layers(s.layers);
  shape->set_heads(s.heads);
  shape->set_kv_heads(s.kv_heads);
  shape->set_head_dim(s.head_dim);
  shape->set_hidden_size(s.hidden);
  shape->set_intermediate_size(s.inter);
  shape->set_vocab_size(s.vocab);
  shape->set_context_length(s.context);
  const capacity::WeightInventory w = capacity::testing::InventoryFromShape(s);
  pb::WeightGroups* g = info.mutable_weight_groups();
  SetGroup(w.attn_q_o, g->mutable_attn_q_o());
  SetGroup(w.attn_k_v, g->mutable_attn_k_v());
  SetGroup(w.mlp, g->mutable_mlp());
  SetGroup(w.embedding, g->mutable_embedding());
  SetGroup(w.lm_head, g->mutable_lm_head());
  g->set_other_bytes(w.other_bytes);
  g->set_tied(w.tied);
  return info;
}

nlohmann::json Plan(const std::string& query) {
  auto text = CapacityPlanJson(TinyInfo(), query);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
}

capacity::CapacityPlan Direct(const capacity::DeviceSpec& device, int tp, double kv_bytes,
                              int64_t max_len, int64_t prompt) {
  const capacity::testing::Shape s = capacity::testing::TinyShape();
  capacity::PlanRequest r;
  r.tp = tp;
  r.kv_element_bytes = kv_bytes;
  r.max_model_len = max_len;
  r.prompt_len = prompt;
  auto p = capacity::PlanCapacity(capacity::testing::ConfigOf(s),
                                  capacity::testing::InventoryFromShape(s), device, r);
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

TEST(CapacityQueryTest, DefaultsAreTheServedModelOnAnH200) {
  const nlohmann::json j = Plan("");
  // The served limit (256) and cache type (f32): a prompt of min(512, 256).
  const capacity::CapacityPlan want = Direct(*capacity::GpuDevice("h200"), 1, 4, 256, 256);
  EXPECT_EQ(j["device"]["name"], "h200");
  EXPECT_EQ(j["kv_dtype"], "f32");
  EXPECT_EQ(j["max_model_len"], 256);
  EXPECT_EQ(j["prompt_len"], 256);
  EXPECT_DOUBLE_EQ(j["kv_bytes_per_token"]["per_rank"].get<double>(), want.kv_bytes_per_token_rank);
  EXPECT_DOUBLE_EQ(j["weight_bytes"]["per_rank"].get<double>(), want.weight_bytes_rank);
  EXPECT_EQ(j["tokens_fit"].get<int64_t>(), want.tokens_fit);
  EXPECT_EQ(j["conversations_fit"].get<int64_t>(), want.conversations_fit);
  EXPECT_DOUBLE_EQ(j["decode"]["floor_seconds_per_token"].get<double>(), want.decode_floor_seconds);
  EXPECT_DOUBLE_EQ(j["prefill"]["seconds"].get<double>(), want.prefill_seconds);
  EXPECT_EQ(j["model"]["layers"], capacity::testing::TinyShape().layers);
  EXPECT_EQ(j["model"]["served_kv_cache_dtype"], "f32");
}

TEST(CapacityQueryTest, ParametersAreBatonPlansFlags) {
  const nlohmann::json j = Plan(
      "device=h100&tp=2&prompt-len=100&max-model-len=300&kv-dtype=fp8&gpu-memory-utilization=0.5"
      "&memory-gb=40&bandwidth-gbs=1000&tflops=100");
  capacity::DeviceSpec d{"h100", 40e9, 1000e9, 100e12};
  capacity::PlanRequest r;
  const capacity::testing::Shape s = capacity::testing::TinyShape();
  r.tp = 2;
  r.kv_element_bytes = 1;
  r.memory_utilization = 0.5;
  r.max_model_len = 300;
  r.prompt_len = 100;
  auto want = capacity::PlanCapacity(capacity::testing::ConfigOf(s),
                                     capacity::testing::InventoryFromShape(s), d, r);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(j["tp"], 2);
  EXPECT_DOUBLE_EQ(j["device"]["memory_bytes"].get<double>(), 40e9);
  EXPECT_DOUBLE_EQ(j["kv_bytes_per_token"]["total"].get<double>(), want->kv_bytes_per_token_total);
  EXPECT_DOUBLE_EQ(j["kv_cache_bytes"]["per_rank"].get<double>(), want->kv_cache_bytes_rank);
  EXPECT_EQ(j["conversations_fit"].get<int64_t>(), want->conversations_fit);
  EXPECT_DOUBLE_EQ(j["decode"]["floor_seconds_per_token"].get<double>(),
                   want->decode_floor_seconds);
  // Every tp the model's heads, KV heads and MLP split into, as the engine would accept.
  std::vector<int64_t> tps;
  for (int64_t tp = 1; tp <= s.heads; ++tp) {
    const bool kv = s.kv_heads % tp == 0 || tp % s.kv_heads == 0;
    if (s.heads % tp == 0 && kv && s.inter % tp == 0) tps.push_back(tp);
  }
  EXPECT_EQ(j["choices"]["tp"].get<std::vector<int64_t>>(), tps);
  EXPECT_EQ(j["choices"]["devices"].get<std::vector<std::string>>(), capacity::GpuDeviceNames());
}

TEST(CapacityQueryTest, RefusalsNameTheParameter) {
  const pb::GetModelInfoResponse info = TinyInfo();
  auto param = [&](const std::string& query) {
    auto r = CapacityPlanJson(info, query);
    EXPECT_FALSE(r.ok()) << query;
    return r.ok() ? std::string("(accepted)") : ParamOf(r.status());
  };
  EXPECT_EQ(param("tp=3"), "tp");
  EXPECT_EQ(param("tp=-2"), "tp");
  EXPECT_EQ(param("tp=99999999999"), "tp");
  EXPECT_EQ(param("tp=two"), "tp");
  EXPECT_EQ(param("device=b200"), "device");
  EXPECT_EQ(param("kv-dtype=int4"), "kv-dtype");
  EXPECT_EQ(param("prompt-len=0"), "prompt-len");
  EXPECT_EQ(param("max-model-len=100000"), "max-model-len");
  EXPECT_EQ(param("gpu-memory-utilization=1.5"), "gpu-memory-utilization");
  EXPECT_EQ(param("memory-gb=nan"), "memory-gb");
  EXPECT_EQ(param("memory-gb=0.000001"), "memory-gb");  // the weights do not fit
  EXPECT_EQ(param("tflops=-1"), "tflops");
  EXPECT_EQ(param("colour=red"), "colour");
  auto twice = CapacityPlanJson(info, "tp=1&tp=2");
  EXPECT_THAT(twice.status().message(), HasSubstr("'tp' is given twice"));
  pb::GetModelInfoResponse old = info;
  old.clear_shape();
  auto no_shape = CapacityPlanJson(old, "");
  EXPECT_EQ(no_shape.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(no_shape.status().message(), HasSubstr("baton plan"));
}

}  // namespace
}  // namespace baton::frontdoor
