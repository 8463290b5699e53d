#include "frontdoor/grpc/unary_call.h"

#include "service/grpc_status.h"

namespace baton::frontdoor {
namespace {

// One call. Only its loop's thread touches it.
class UnaryCall {
 public:
  UnaryCall(const UnaryMethod* m, grpc::ServerCompletionQueue* cq, ApiLoopState* state)
      : m_(*m), cq_(cq), state_(state), responder_(&ctx_) {
    state_->live_calls.fetch_add(1);
  }

  void Listen() { m_.request(&ctx_, &in_, &responder_, cq_, &accept_step_); }

 private:
  void OnAccept(bool ok) {
    if (!ok) {  // the server is shutting down
      Delete();
      return;
    }
    if (!state_->stopping.load()) (new UnaryCall(&m_, cq_, state_))->Listen();
    const absl::Status s = m_.handle(ctx_, in_, &out_);
    if (s.ok()) {
      responder_.Finish(out_, grpc::Status::OK, &finish_step_);
    } else {
      responder_.FinishWithError(service::ToGrpcStatus(s), &finish_step_);
    }
  }

  void OnFinish(bool /*ok*/) { Delete(); }

  void Delete() {
    ApiLoopState* state = state_;
    delete this;
    state->live_calls.fetch_sub(1);
  }

  const UnaryMethod& m_;
  grpc::ServerCompletionQueue* cq_;
  ApiLoopState* state_;
  grpc::ServerContext ctx_;
  grpc::ByteBuffer in_, out_;
  grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> responder_;

  using Step = dispatch::MemberTag<UnaryCall>;
  Step accept_step_{this, &UnaryCall::OnAccept};
  Step finish_step_{this, &UnaryCall::OnFinish};
};

}  // namespace

void StartUnaryCalls(const UnaryMethod* method, dispatch::CompletionLoops* loops,
                     ApiLoopState* state) {
  for (int i = 0; i < loops->size(); ++i) {
    (new UnaryCall(method, loops->server_queue(i), state))->Listen();
  }
}

}  // namespace baton::frontdoor
