#include "tools/bench_serve_grpc_client.h"

#include <algorithm>
#include <chrono>

#include "absl/status/status.h"
#include "common/strings.h"
#include "grpcpp/alarm.h"
#include "grpcpp/grpcpp.h"

namespace baton::tools {
namespace {

// Runs a function on the loop thread: an alarm that has already expired fires at once.
class PostedFn : public GrpcBenchClient::Tag {
 public:
  PostedFn(grpc::CompletionQueue* cq, std::function<void()> fn) : fn_(std::move(fn)) {
    alarm_.Set(cq, gpr_time_0(GPR_CLOCK_MONOTONIC), this);
  }
  void Proceed(bool ok) override {
    if (ok) fn_();
    delete this;
  }

 private:
  grpc::Alarm alarm_;
  std::function<void()> fn_;
};

}  // namespace

baton::v1::GenerateRequest BuildGenerateRequest(const RequestOptions& options,
                                                const BenchPrompt& prompt) {
  baton::v1::GenerateRequest req;
  req.set_model(options.model);
  if (options.send_token_ids && !prompt.token_ids.empty()) {
    req.mutable_token_ids()->mutable_ids()->Add(prompt.token_ids.begin(), prompt.token_ids.end());
  } else {
    req.set_text(prompt.text);
  }
  req.mutable_sampling()->set_temperature(options.temperature);
  req.mutable_stop()->set_max_tokens(prompt.output_len);
  req.mutable_stop()->set_ignore_eos(options.ignore_eos);
  return req;
}

// One Generate call: StartCall, then Read until the stream ends, then Finish. One
// operation is pending at a time, so the call is its own tag and `state_` says which.
class GrpcBenchClient::Call : public GrpcBenchClient::Tag {
 public:
  Call(GrpcBenchClient* client, const BenchPrompt& prompt, Done done)
      : done_(std::move(done)), start_(BenchClock::now()), clock_(start_) {
    const RequestOptions& o = client->options_.request;
    result_.prompt_len = prompt.prompt_len;
    context_.set_deadline(std::chrono::system_clock::now() +
                          std::chrono::duration_cast<std::chrono::system_clock::duration>(
                              std::chrono::duration<double>(o.timeout_s)));
    if (!o.api_key.empty()) context_.AddMetadata("authorization", StrCat("Bearer ", o.api_key));
    baton::v1::Baton::Stub& stub = *client->stubs_[client->next_stub_++ % client->stubs_.size()];
    reader_ = stub.PrepareAsyncGenerate(&context_, BuildGenerateRequest(o, prompt), &client->cq_);
    reader_->StartCall(this);
  }

  void Proceed(bool ok) override {
    switch (state_) {
      case State::kStarting:
      case State::kReading:
        if (state_ == State::kReading && ok) OnResponse(BenchClock::now());
        if (ok) {
          state_ = State::kReading;
          reader_->Read(&response_, this);
        } else {
          // The stream ended (or never started): the status says how.
          state_ = State::kFinishing;
          reader_->Finish(&status_, this);
        }
        return;
      case State::kFinishing:
        OnFinished(BenchClock::now());
        delete this;
        return;
    }
  }

 private:
  enum class State { kStarting, kReading, kFinishing };

  void OnResponse(BenchClock::time_point t) {
    if (response_.token_ids_size() > 0 || !response_.text().empty()) clock_.OnContent(t);
    token_ids_ += response_.token_ids_size();
    if (response_.has_usage()) {
      // proto3 cannot tell 0 from unset; no real prompt has 0 tokens.
      if (response_.usage().prompt_tokens() > 0) {
        result_.prompt_tokens = response_.usage().prompt_tokens();
      }
      result_.cached_tokens = response_.usage().cached_tokens();
      completion_tokens_ = response_.usage().completion_tokens();
    }
    if (response_.finished()) finished_ = true;
  }

  void OnFinished(BenchClock::time_point end) {
    clock_.Finish(end, &result_);
    if (!status_.ok()) {
      result_.error = StrCat(
          "gRPC ", absl::StatusCodeToString(static_cast<absl::StatusCode>(status_.error_code())),
          ": ", status_.error_message());
    } else if (!finished_) {
      result_.error = "the stream ended without a finished response";
    } else {
      // Usage is authoritative; without it, the ids streamed, and without ids, the
      // messages that carried text.
      if (completion_tokens_ > 0 || (completion_tokens_ == 0 && token_ids_ == 0)) {
        result_.output_tokens = completion_tokens_;
      } else {
        result_.output_tokens = token_ids_ > 0 ? token_ids_ : clock_.content_chunks();
      }
      result_.success = true;
    }
    done_(std::move(result_));
  }

  Done done_;
  BenchClock::time_point start_;
  StreamClock clock_;
  RequestResult result_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientAsyncReader<baton::v1::GenerateResponse>> reader_;
  baton::v1::GenerateResponse response_;
  grpc::Status status_;
  State state_ = State::kStarting;
  int64_t token_ids_ = 0;
  int64_t completion_tokens_ = -1;
  bool finished_ = false;
};

GrpcBenchClient::GrpcBenchClient(GrpcClientOptions options) : options_(std::move(options)) {
  const int channels = std::max(1, options_.channels);
  for (int i = 0; i < channels; ++i) {
    grpc::ChannelArguments args;
    // Without a private subchannel pool, channels to one target share one connection.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetMaxReceiveMessageSize(-1);
    stubs_.push_back(baton::v1::Baton::NewStub(
        grpc::CreateCustomChannel(options_.target, grpc::InsecureChannelCredentials(), args)));
  }
}

GrpcBenchClient::~GrpcBenchClient() {
  // No call is in flight (the header's contract), so what is still queued are posted
  // functions that never ran: released, not run.
  cq_.Shutdown();
  void* tag;
  bool ok;
  while (cq_.Next(&tag, &ok)) static_cast<Tag*>(tag)->Proceed(false);
}

void GrpcBenchClient::Start(const BenchPrompt& prompt, Done done) {
  new Call(this, prompt, std::move(done));  // deletes itself once finished
}

void GrpcBenchClient::Post(std::function<void()> fn) { new PostedFn(&cq_, std::move(fn)); }

void GrpcBenchClient::Run() {
  stopping_ = false;
  void* tag;
  bool ok;
  while (!stopping_ && cq_.Next(&tag, &ok)) static_cast<Tag*>(tag)->Proceed(ok);
}

void GrpcBenchClient::Stop() { stopping_ = true; }

}  // namespace baton::tools
