#include "bench/frontdoor_stub.h"

#include <thread>
#include <utility>

#include "baton/internal/v1/worker.grpc.pb.h"
#include "common/strings.h"
#include "service/health_service.h"

namespace baton::bench {
namespace {

namespace pb = ::baton::internal::v1;

// Bounds what one request may ask of the stub, as the real worker bounds its inputs.
constexpr int64_t kMaxTokens = int64_t{1} << 20;

}  // namespace

class StubWorker::Service final : public pb::Worker::Service {
 public:
  Service(StubWorker* owner, int64_t max_model_len, int32_t vocab_size)
      : owner_(owner), max_model_len_(max_model_len), vocab_size_(vocab_size) {}

  grpc::Status Generate(grpc::ServerContext*, const pb::GenerateRequest* req,
                        grpc::ServerWriter<pb::GenerateResponse>* writer) override {
    const int64_t n = req->params().has_max_tokens() ? req->params().max_tokens() : 16;
    if (n < 1 || n > kMaxTokens) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          StrCat("max_tokens is ", n, "; the stub takes 1 to ", kMaxTokens));
    }
    const std::vector<int32_t>& ids = owner_->token_ids_;
    StampTable& table = *owner_->table_;
    // Zero: each event is written as soon as the previous write returned (the ceiling).
    const std::chrono::microseconds interval = table.interval();
    // True: events fall on the ticks of one clock shared by all calls (every stream's
    // token at once); false: each call keeps its own clock from when it started.
    const bool aligned = table.aligned();
    std::vector<Clock::time_point> writes;
    writes.reserve(static_cast<size_t>(n));
    Clock::time_point next = Clock::now();
    pb::GenerateResponse msg;
    for (int64_t i = 0; i < n; ++i) {
      if (interval.count() > 0) {
        const Clock::time_point now = Clock::now();
        if (aligned) {
          // The next tick of one clock that every call shares: a batching engine emits
          // each step's tokens for all its sequences at once.
          next = owner_->epoch_ + ((now - owner_->epoch_) / interval + 1) * interval;
        } else {
          // A fixed rate per call; a late wake-up shifts the rest instead of bursting to
          // catch up, since a real engine step that runs late does not emit two tokens.
          next += interval;
          if (next < now) next = now;
        }
        if (next > now) std::this_thread::sleep_until(next);
      }
      msg.Clear();
      msg.add_token_ids(ids[static_cast<size_t>(i) % ids.size()]);
      // Like the real worker: usage with the prompt on the first event and on the last.
      if (i == 0 || i == n - 1) msg.mutable_usage()->set_prompt_tokens(req->prompt_ids_size());
      if (i == n - 1) {
        msg.set_finished(true);
        msg.set_finish_reason("length");
        msg.mutable_usage()->set_completion_tokens(n);
      }
      // Stamped before the write, where a real worker has its token: the cost of sending
      // it belongs to the path being measured.
      writes.push_back(Clock::now());
      if (!writer->Write(msg)) {
        table.Record(StampSlot(req->request_id()), writes);
        table.EndCall();
        return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
      }
    }
    table.Record(StampSlot(req->request_id()), writes);
    table.EndCall();
    return grpc::Status::OK;
  }

  grpc::Status GetStats(grpc::ServerContext*, const pb::GetStatsRequest*,
                        pb::GetStatsResponse*) override {
    return grpc::Status::OK;
  }

  grpc::Status GetModelInfo(grpc::ServerContext*, const pb::GetModelInfoRequest*,
                            pb::GetModelInfoResponse* out) override {
    out->set_model_id("stub");
    out->set_architecture("stub");
    out->set_max_model_len(max_model_len_);
    out->set_vocab_size(vocab_size_);
    out->set_block_size(16);
    out->set_block_hash_spec_version(1);  // what a real worker announces
    out->add_eos_token_ids(2);
    return grpc::Status::OK;
  }

 private:
  StubWorker* owner_;
  int64_t max_model_len_;
  int32_t vocab_size_;
};

absl::StatusOr<std::unique_ptr<StubWorker>> StubWorker::Start(std::vector<int32_t> token_ids,
                                                              int64_t max_model_len,
                                                              int32_t vocab_size,
                                                              StampTable* table) {
  if (token_ids.empty()) return absl::InvalidArgumentError("the stub needs token ids to emit");
  std::unique_ptr<StubWorker> s(new StubWorker());
  s->token_ids_ = std::move(token_ids);
  s->table_ = table;
  s->service_ = std::make_unique<Service>(s.get(), max_model_len, vocab_size);
  // The router polls grpc.health.v1 and routes only to workers that answer SERVING. The
  // workers' own health service, so that no callback-API threads run in the process.
  grpc::EnableDefaultHealthCheckService(false);
  s->health_ = std::make_unique<service::HealthService>(std::vector<std::string>{""});
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &s->port_);
  builder.RegisterService(s->service_.get());
  builder.RegisterService(s->health_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError("the stub worker cannot listen on 127.0.0.1");
  }
  return s;
}

StubWorker::~StubWorker() { Shutdown(); }

std::string StubWorker::address() const { return StrCat("127.0.0.1:", port_); }

void StubWorker::Shutdown() {
  if (server_ == nullptr) return;
  health_->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now());
  server_.reset();
}

}  // namespace baton::bench
