// An InvalidArgument status that names the request parameter it is about, so that every
// layer that checks a request (the router's parser, the engine's sampling checks) can say
// which field was wrong and the front doors can tell the client: OpenAI's error `param`,
// gRPC's google.rpc.BadRequest (service/grpc_status.h carries it across internal calls).
//
//   return ParamError("temperature", "temperature must be in [0, 100], got 200");
//   ...
//   std::string param = ParamOf(status);  // "temperature"
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace baton {

// InvalidArgument(message) carrying `param` (e.g. "messages[2].content") as its payload.
absl::Status ParamError(std::string_view param, std::string_view message);

// The parameter a status names, or "" when none.
std::string ParamOf(const absl::Status& status);

// `status` naming `param` instead (the same code and message); `status` itself when OK.
absl::Status WithParam(absl::Status status, std::string_view param);

}  // namespace baton
