#include "dispatch/remote_prefill.h"

#include <chrono>
#include <memory>
#include <random>

#include "baton/internal/v1/kv_transfer.grpc.pb.h"

#include "common/strings.h"
#include "dispatch/completion_loops.h"

namespace baton::dispatch {

namespace pb = ::baton::internal::v1;

std::string TransferId(const pb::GenerateRequest& wire, int attempt) {
  return StrCat(wire.request_id(), "#p", attempt);
}

pb::PrefillRequest PrefillCall(const pb::GenerateRequest& wire, const std::string& transfer_id,
                               const Route& route) {
  pb::PrefillRequest out;
  *out.mutable_request() = wire;
  out.mutable_request()->set_request_id(transfer_id);
  // The decode stream's own fields: the prefill worker sends the transfer, it awaits none.
  out.mutable_request()->clear_kv_transfer_id();
  out.mutable_request()->clear_await_kv_transfer_ms();
  out.set_decode_worker(route.decode->target());
  return out;
}

void EnsureSeed(pb::GenerateRequest* wire) {
  if (wire->params().has_seed()) return;
  thread_local std::mt19937_64 rng{std::random_device{}()};
  wire->mutable_params()->set_seed(rng());
}

AfterPrefill DecideAfterPrefillFailure(const Route& route, const WorkerClient* failed,
                                       const grpc::Status& status, int attempt) {
  switch (status.error_code()) {
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return {};
    default:
      break;
  }
  const PrefillFailover policy =
      route.pool == nullptr ? PrefillFailover::kLocal : route.pool->failover();
  if (policy == PrefillFailover::kNone) return {};
  if (policy == PrefillFailover::kRetry && attempt == 0 && route.pool != nullptr) {
    if (WorkerClient* other = route.pool->OtherPrefill(failed); other != nullptr) {
      return {AfterPrefill::kRetry, other};
    }
  }
  return {AfterPrefill::kLocal, nullptr};
}

void ReleaseTransfer(const WorkerClient& decode, const std::string& transfer_id,
                     grpc::CompletionQueue* cq) {
  // Owns everything the call needs, so that it outlives the request that started it; its
  // completion on the loop deletes it. (Not the callback API: that would start gRPC's own
  // polling threads in the router, dispatch/completion_loops.h.)
  struct Call final : LoopTag {
    void Done(bool /*ok*/) override { delete this; }
    std::unique_ptr<pb::KvTransfer::Stub> stub;
    grpc::ClientContext ctx;
    pb::ReleaseRequest req;
    pb::ReleaseResponse resp;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<pb::ReleaseResponse>> reader;
  };
  auto* call = new Call;
  call->stub = pb::KvTransfer::NewStub(decode.channel());
  call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  call->req.set_request_id(transfer_id);
  call->reader = call->stub->PrepareAsyncRelease(&call->ctx, call->req, cq);
  call->reader->StartCall();
  call->reader->Finish(&call->resp, &call->status, call);
}

void AddPrefillCall(const grpc::Status& status, const pb::PrefillResponse& response, double seconds,
                    PrefillTimings* t) {
  t->seconds += seconds;
  if (!status.ok()) return;
  t->queue_seconds = response.queue_seconds();
  t->compute_seconds = response.compute_seconds();
  t->kv_transfer_seconds = response.exposed_transfer_seconds();
}

void RecordPrefill(const Route& route, const grpc::Status& status,
                   const pb::PrefillResponse& response, const AfterPrefill& next) {
  RouterMetrics* m = route.pool == nullptr ? nullptr : route.pool->metrics();
  if (m == nullptr) return;
  if (!status.ok()) {
    m->CountPrefill(next.action == AfterPrefill::kRetry   ? "retry"
                    : next.action == AfterPrefill::kLocal ? "local"
                                                          : "failed");
    return;
  }
  m->CountPrefill("ok");
  m->ObservePrefillPhase("queue", response.queue_seconds());
  m->ObservePrefillPhase("compute", response.compute_seconds());
  m->ObservePrefillPhase("transfer", response.transfer_seconds());
  m->ObservePrefillPhase("exposed_transfer", response.exposed_transfer_seconds());
}

}  // namespace baton::dispatch
