// baton.v1's unary methods that take text (Tokenize, Detokenize) on the router's
// CompletionLoops, as raw methods: the request's bytes are parsed here (wire_message.h), so
// that a string field that is not UTF-8 is the client's INVALID_ARGUMENT naming the field,
// not gRPC's INTERNAL "Unable to parse request". The sync API parses before any handler
// runs, and the callback API would start gRPC's own polling threads in the router
// (completion_loops.h). The handler runs on the loop's thread, as Generate's tokenizing does.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "dispatch/completion_loops.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/async_unary_call.h"
#include "grpcpp/support/byte_buffer.h"

namespace baton::frontdoor {

// The calls in flight on all loops, Generate's and these (one waiting per method and loop
// included).
struct ApiLoopState {
  std::atomic<bool> stopping{false};  // no new calls are accepted once set
  std::atomic<int> live_calls{0};
};

struct UnaryMethod {
  std::string name;  // "Tokenize": the requests metric's label
  // The generated RequestX of a WithRawMethod_X service.
  std::function<void(grpc::ServerContext*, grpc::ByteBuffer*,
                     grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>*,
                     grpc::ServerCompletionQueue*, void* tag)>
      request;
  // Answers one call: the response's bytes in `out`, or the error.
  std::function<absl::Status(const grpc::ServerContext&, const grpc::ByteBuffer& in,
                             grpc::ByteBuffer* out)>
      handle;
};

// Waits for calls of `method` on each of `loops`' server queues; each accepted call waits
// for the next. `method`, `loops` and `state` must outlive every call.
void StartUnaryCalls(const UnaryMethod* method, dispatch::CompletionLoops* loops,
                     ApiLoopState* state);

}  // namespace baton::frontdoor
