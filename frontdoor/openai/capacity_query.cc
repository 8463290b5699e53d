#include "frontdoor/openai/capacity_query.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/numbers.h"
#include "capacity/capacity_plan.h"
#include "capacity/gpu_devices.h"
#include "capacity/plan_json.h"
#include "capacity/tp_split.h"
#include "common/param_error.h"
#include "common/status.h"
#include "common/strings.h"
#include "common/utf8.h"
#include "service/http_query.h"

namespace baton::frontdoor {
namespace {

namespace pb = ::baton::internal::v1;

constexpr size_t kMaxParams = 16;
constexpr int64_t kDefaultPromptLen = 512;  // as `baton plan`
constexpr int64_t kMaxTp = 1024;            // no model has more heads to split
// Overrides of the device's figures: far above any device, and finite.
constexpr double kMaxMemoryGb = 1e5;
constexpr double kMaxBandwidthGbs = 1e6;
constexpr double kMaxTflops = 1e6;
constexpr char kParams[] =
    "device, tp, prompt-len, max-model-len, kv-dtype, gpu-memory-utilization, memory-gb, "
    "bandwidth-gbs, tflops";

struct Query {
  std::string device = "h200";
  std::optional<int64_t> tp, prompt_len, max_model_len;
  std::optional<std::string> kv_dtype;
  double memory_utilization = 0.9;
  std::optional<double> memory_gb, bandwidth_gbs, tflops;
};

absl::StatusOr<int64_t> Integer(const std::string& name, const std::string& value) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v)) {
    return ParamError(name, StrCat(name, " must be an integer, got '", SanitizeUtf8(value), "'"));
  }
  return v;
}

absl::StatusOr<double> Number(const std::string& name, const std::string& value, double max) {
  double v = 0;
  if (!absl::SimpleAtod(value, &v) || !std::isfinite(v) || v <= 0 || v > max) {
    return ParamError(
        name, StrCat(name, " must be a number in (0, ", max, "], got '", SanitizeUtf8(value), "'"));
  }
  return v;
}

absl::StatusOr<Query> ParseParams(std::string_view query) {
  auto params = service::ParseQuery(query, kMaxParams);
  if (!params.ok()) return params.status();
  Query q;
  for (const auto& [name, value] : *params) {
    if (name == "device") {
      q.device = value;
    } else if (name == "tp") {
      BATON_ASSIGN_OR_RETURN(q.tp, Integer(name, value));
      if (*q.tp < 1 || *q.tp > kMaxTp) {
        return ParamError(name, StrCat("tp ", *q.tp, " must be between 1 and ", kMaxTp));
      }
    } else if (name == "prompt-len") {
      BATON_ASSIGN_OR_RETURN(q.prompt_len, Integer(name, value));
    } else if (name == "max-model-len") {
      BATON_ASSIGN_OR_RETURN(q.max_model_len, Integer(name, value));
    } else if (name == "kv-dtype") {
      q.kv_dtype = value;
    } else if (name == "gpu-memory-utilization") {
      BATON_ASSIGN_OR_RETURN(q.memory_utilization, Number(name, value, 1.0));
    } else if (name == "memory-gb") {
      BATON_ASSIGN_OR_RETURN(q.memory_gb, Number(name, value, kMaxMemoryGb));
    } else if (name == "bandwidth-gbs") {
      BATON_ASSIGN_OR_RETURN(q.bandwidth_gbs, Number(name, value, kMaxBandwidthGbs));
    } else if (name == "tflops") {
      BATON_ASSIGN_OR_RETURN(q.tflops, Number(name, value, kMaxTflops));
    } else {
      return ParamError(name, StrCat("unknown parameter '", SanitizeUtf8(name),
                                     "'; /inspect/plan takes ", kParams));
    }
  }
  return q;
}

// The capacity library's messages name `baton plan`'s flags ("--prompt-len 9000 must
// be..."); the query parameter is the same name without the dashes.
absl::Status NameParam(absl::Status status) {
  const std::string message(status.message());
  const size_t dashes = message.find("--");
  if (dashes == std::string::npos) return status;
  const size_t end = message.find_first_of(" '", dashes);
  std::string flag = message.substr(dashes + 2, end == std::string::npos ? end : end - dashes - 2);
  if (flag == "tensor-parallel-size") flag = "tp";
  return WithParam(std::move(status), flag);
}

capacity::ModelShape ShapeOf(const pb::ModelShape& s) {
  return {s.layers(),     s.heads(),         s.kv_heads(),
          s.head_dim(),   s.hidden_size(),   s.intermediate_size(),
          s.vocab_size(), s.context_length()};
}

capacity::TensorGroup GroupOf(const pb::TensorGroup& g) { return {g.bytes(), g.elements()}; }

capacity::WeightInventory InventoryOf(const pb::WeightGroups& w) {
  capacity::WeightInventory inv;
  inv.attn_q_o = GroupOf(w.attn_q_o());
  inv.attn_k_v = GroupOf(w.attn_k_v());
  inv.mlp = GroupOf(w.mlp());
  inv.embedding = GroupOf(w.embedding());
  inv.lm_head = GroupOf(w.lm_head());
  inv.other_bytes = w.other_bytes();
  inv.tied = w.tied();
  return inv;
}

}  // namespace

absl::StatusOr<std::string> CapacityPlanJson(const pb::GetModelInfoResponse& info,
                                             std::string_view query) {
  BATON_ASSIGN_OR_RETURN(const Query q, ParseParams(query));
  if (!info.has_shape() || info.shape().layers() < 1) {
    return absl::FailedPreconditionError(
        "the workers did not report the model's shape (they are older than this router); "
        "upgrade them, or run `baton plan --model MODEL` where the model is");
  }
  const capacity::ModelShape shape = ShapeOf(info.shape());
  auto device = capacity::GpuDevice(q.device);
  if (!device.ok()) return NameParam(device.status());
  if (q.memory_gb) device->memory_bytes = *q.memory_gb * 1e9;
  if (q.bandwidth_gbs) device->bandwidth_bytes_s = *q.bandwidth_gbs * 1e9;
  if (q.tflops) device->flops = *q.tflops * 1e12;

  capacity::PlanRequest req;
  req.tp = static_cast<int>(q.tp.value_or(1));
  // The served cache's type unless asked otherwise: what these workers store per element.
  const std::string kv_dtype =
      q.kv_dtype.value_or(info.kv_cache_dtype().empty() ? "bf16" : info.kv_cache_dtype());
  auto kv_bytes = capacity::KvElementBytes(kv_dtype);
  if (!kv_bytes.ok()) return NameParam(kv_bytes.status());
  req.kv_element_bytes = *kv_bytes;
  req.memory_utilization = q.memory_utilization;
  // One conversation: the served limit, unless asked otherwise.
  req.max_model_len = q.max_model_len.value_or(std::min(info.max_model_len(), shape.context));
  req.prompt_len = q.prompt_len.value_or(std::min(kDefaultPromptLen, req.max_model_len));
  auto plan = capacity::PlanCapacity(shape, InventoryOf(info.weight_groups()), *device, req);
  if (!plan.ok()) return NameParam(plan.status());

  nlohmann::json j = capacity::PlanJson(*device, req, *plan);
  j["kv_dtype"] = kv_dtype;
  j["model"] = {{"name", info.model_id()},
                {"architecture", info.architecture()},
                {"weight_dtype", info.weight_dtype()},
                {"served_kv_cache_dtype", info.kv_cache_dtype()},
                {"served_max_model_len", info.max_model_len()}};
  j["model"].update(capacity::ShapeJson(shape));
  nlohmann::json tps = nlohmann::json::array();
  for (int64_t tp = 1; tp <= shape.heads; ++tp) {
    if (capacity::SplitForTp(shape, tp).ok()) tps.push_back(tp);
  }
  j["choices"] = {{"devices", capacity::GpuDeviceNames()},
                  {"tp", std::move(tps)},
                  {"kv_dtype", {"bf16", "f16", "f32", "fp8"}}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace baton::frontdoor
