// GET /inspect/plan: `baton plan`'s figures for the served model on a data-centre GPU,
// from the shape and weight groups its worker reported (GetModelInfo), for the
// inspector's capacity panel (docs/inspector.md). The router never opens the model.
//
// Query parameters carry `baton plan`'s flags by the same names: device (h200, h100,
// a100; default h200), tp, prompt-len, max-model-len, kv-dtype, gpu-memory-utilization,
// memory-gb, bandwidth-gbs, tflops.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "baton/internal/v1/worker.pb.h"

namespace baton::frontdoor {

// The plan as JSON (capacity/plan_json.h's fields, plus "model" with its shape and the
// served cache dtype, and "choices": the devices and every tp the model splits into).
// InvalidArgument naming the parameter (ParamOf) for a bad or unknown one;
// FailedPrecondition when the worker reported no shape (one older than the router).
absl::StatusOr<std::string> CapacityPlanJson(const baton::internal::v1::GetModelInfoResponse& info,
                                             std::string_view query);

}  // namespace baton::frontdoor
