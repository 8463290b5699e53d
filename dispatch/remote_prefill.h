// The prefill leg of a split request, shared by the HTTP and gRPC paths: the Prefill call
// a router sends to a prefill worker, and what it does when that call fails
// (docs/disaggregation.md, "Failures").
#pragma once

#include <string>

#include "baton/internal/v1/worker.pb.h"
#include "dispatch/generation_types.h"
#include "dispatch/worker_pool.h"
#include "grpcpp/grpcpp.h"

namespace baton::dispatch {

// The transfer id of attempt `attempt` of a leg: unique per attempt, so that a slow
// earlier attempt can never complete a later reservation.
std::string TransferId(const baton::internal::v1::GenerateRequest& wire, int attempt);

// The Prefill call for `wire` (which must carry a seed, so that both legs sample as one
// sequence) into `route.decode`'s pages.
baton::internal::v1::PrefillRequest PrefillCall(const baton::internal::v1::GenerateRequest& wire,
                                                const std::string& transfer_id, const Route& route);

// Gives `wire` a random seed when it has none: a split request samples its first token on
// one worker and the rest on another, which must continue the same random stream.
void EnsureSeed(baton::internal::v1::GenerateRequest* wire);

struct AfterPrefill {
  enum Action { kRetry, kLocal, kFail } action = kFail;
  WorkerClient* worker = nullptr;  // kRetry: where
};

// What to do after attempt `attempt` (0 first) on `failed` ended with `status`. Refusals
// that another prefill worker would meet too (the decode worker is full, the request is
// invalid, the layouts differ) and cancellations fail the request; the rest follow the
// pool's failover policy.
AfterPrefill DecideAfterPrefillFailure(const Route& route, const WorkerClient* failed,
                                       const grpc::Status& status, int attempt);

// Asks `decode` to free the pages reserved for `transfer_id`, without waiting for the
// answer. For a split leg that ends before the decode stream delivered anything (the
// client cancelled, the decode call failed): the prefill worker releases on its own
// failures, but a Prefill that succeeded, or that the router cancelled after the worker
// had finished, leaves a reservation that would otherwise hold pages until its lease ends.
// A transfer the decode worker already claimed, or never had, answers NOT_FOUND, harmlessly.
// The call completes on `cq` (a CompletionLoops queue), whose loop must keep running.
void ReleaseTransfer(const WorkerClient& decode, const std::string& transfer_id,
                     grpc::CompletionQueue* cq);

// Adds one Prefill call that took `seconds` (as the router saw it) to `t`; one that
// succeeded also gives the prefill worker's phases.
void AddPrefillCall(const grpc::Status& status,
                    const baton::internal::v1::PrefillResponse& response, double seconds,
                    PrefillTimings* t);

// Counts a Prefill call's outcome in the pool's metrics: `status` OK records the phases of
// `response`; else `next` says what followed.
void RecordPrefill(const Route& route, const grpc::Status& status,
                   const baton::internal::v1::PrefillResponse& response, const AfterPrefill& next);

}  // namespace baton::dispatch
