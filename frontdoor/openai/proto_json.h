// A protobuf message as the JSON the OpenAI front door writes: proto field names, every
// field present (zeros too, so that a page can read any of them), repeated fields as
// arrays, and 64-bit integers as JSON numbers (protobuf's own mapping makes them strings,
// which no OpenAI-style client expects). Used for the `trace` object (docs/inspector.md).
#pragma once

#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"

namespace baton::frontdoor {

nlohmann::ordered_json ProtoToJson(const google::protobuf::Message& message);

}  // namespace baton::frontdoor
