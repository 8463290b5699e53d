// A traced request's engine steps on the wire (baton.v1.StepTrace, docs/inspector.md).
#pragma once

#include <span>

#include "baton/v1/trace.pb.h"
#include "engine/step_trace.h"
#include "google/protobuf/repeated_ptr_field.h"

namespace baton::worker {

// Appends `steps` to `out`, their start times moved by `offset_seconds` (from the engine's
// Submit to the call's arrival on this worker). Token texts stay empty: the router has
// the tokenizer.
void AppendStepTraces(std::span<const engine::StepTrace> steps, double offset_seconds,
                      google::protobuf::RepeatedPtrField<baton::v1::StepTrace>* out);

}  // namespace baton::worker
