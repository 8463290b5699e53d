// baton.v1 Generate on gRPC's async API, on the router's CompletionLoops: each call runs
// on one loop's queue, both legs: the client's call (server side) and the worker's stream
// (client side). A worker message is decoded (ChoiceDecoder) and written to the client by
// the thread that read it, and that thread also gets the write's completion. So a token
// crosses no thread hand-off in the router. (The callback API hands every write
// completion to another thread, and the sync API a thread per call; both cost more per
// token: docs/perf/frontdoor.md.)
//
// While a write is in flight, later deltas are merged into the next message, so a slow
// client gets fewer, larger messages instead of a growing queue. Cancellation goes both
// ways: the client's cancel or deadline cancels the worker's stream; a worker failure, or
// a stop string the router matched, ends the client's call.
#pragma once

#include "baton/v1/baton.grpc.pb.h"
#include "dispatch/completion_loops.h"
#include "frontdoor/grpc/grpc_api.h"
#include "frontdoor/grpc/unary_call.h"

namespace baton::frontdoor {

// Generate runs on completion queues, and takes its request as bytes (wire_message.h) so
// that a request protobuf would refuse is answered INVALID_ARGUMENT naming the field.
using AsyncGenerateService = baton::v1::Baton::WithRawMethod_Generate<baton::v1::Baton::Service>;

// Waits for calls on each of `loops`' server queues; each accepted call waits for the
// next. `context`, `service`, `loops` and `state` must outlive every call (state's
// live_calls says when none is left).
void StartGenerateCalls(const GrpcApiContext* context, AsyncGenerateService* service,
                        dispatch::CompletionLoops* loops, ApiLoopState* state);

}  // namespace baton::frontdoor
