#include "bench/frontdoor_loop_clients.h"

#include <array>
#include <atomic>
#include <optional>
#include <string_view>
#include <utility>

#include "baton/internal/v1/worker.grpc.pb.h"
#include "baton/v1/baton.grpc.pb.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http/buffer_body.hpp"
#include "boost/beast/http/read.hpp"
#include "boost/beast/http/write.hpp"
#include "common/status.h"
#include "common/strings.h"
#include "grpcpp/alarm.h"

namespace baton::bench {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using net::ip::tcp;

// What differs between the two gRPC paths.
struct DirectCall {
  using Stub = baton::internal::v1::Worker::Stub;
  using Response = baton::internal::v1::GenerateResponse;
  static constexpr std::string_view kName = "direct Generate";
  static std::unique_ptr<Stub> NewStub(int port) {
    return baton::internal::v1::Worker::NewStub(OwnChannel(port));
  }
  static auto Prepare(Stub& stub, grpc::ClientContext* ctx, const ExpectedStream& e,
                      const std::string& id, int tokens, grpc::CompletionQueue* cq) {
    return stub.PrepareAsyncGenerate(ctx, DirectRequest(e, id, tokens), cq);
  }
  static void Check(StreamCheck& check, const Response& msg, Clock::time_point t) {
    check.OnDirect(msg, t);
  }
};

struct RouterCall {
  using Stub = baton::v1::Baton::Stub;
  using Response = baton::v1::GenerateResponse;
  static constexpr std::string_view kName = "router Generate";
  static std::unique_ptr<Stub> NewStub(int port) {
    return baton::v1::Baton::NewStub(OwnChannel(port));
  }
  static auto Prepare(Stub& stub, grpc::ClientContext* ctx, const ExpectedStream& /*e*/,
                      const std::string& id, int tokens, grpc::CompletionQueue* cq) {
    return stub.PrepareAsyncGenerate(ctx, RouterGrpcRequest(id, tokens), cq);
  }
  static void Check(StreamCheck& check, const Response& msg, Clock::time_point t) {
    check.OnRouterGrpc(msg, t);
  }
};

// Whatever completes on the queue: a stream's call step, or a posted function.
class Tag {
 public:
  virtual ~Tag() = default;
  virtual void Proceed(bool ok) = 0;
};

// One stream: a connection of its own and at most one call on it at a time.
template <typename Call>
class GrpcStream final : public Tag {
 public:
  GrpcStream(int port, const ExpectedStream* expected, grpc::CompletionQueue* cq)
      : expected_(*expected), cq_(cq), stub_(Call::NewStub(port)) {}

  void Start(const std::string& request_id, int tokens, std::vector<Clock::time_point>* received,
             LoopClients::Done done) {
    request_id_ = request_id;
    done_ = std::move(done);
    check_.emplace(expected_, request_id, tokens, received);
    ctx_ = std::make_unique<grpc::ClientContext>();
    reader_ = Call::Prepare(*stub_, ctx_.get(), expected_, request_id, tokens, cq_);
    step_ = Step::kStart;
    reader_->StartCall(this);
  }

  void Proceed(bool ok) override {
    const Clock::time_point t = Clock::now();
    switch (step_) {
      case Step::kStart:
      case Step::kRead:
        if (ok && step_ == Step::kRead) Call::Check(*check_, msg_, t);
        if (ok) {
          step_ = Step::kRead;
          reader_->Read(&msg_, this);
        } else {
          // The stream ended (or never started): the status says which.
          step_ = Step::kFinish;
          reader_->Finish(&status_, this);
        }
        return;
      case Step::kFinish: {
        absl::Status s = FromGrpcStatus(status_, StrCat(Call::kName, " ", request_id_));
        if (s.ok()) s = check_->Finish();
        reader_.reset();
        ctx_.reset();
        LoopClients::Done done = std::move(done_);
        done(std::move(s));
        return;
      }
    }
  }

 private:
  enum class Step { kStart, kRead, kFinish };

  const ExpectedStream& expected_;
  grpc::CompletionQueue* cq_;
  std::unique_ptr<typename Call::Stub> stub_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientAsyncReader<typename Call::Response>> reader_;
  typename Call::Response msg_;
  grpc::Status status_;
  std::optional<StreamCheck> check_;
  std::string request_id_;
  LoopClients::Done done_;
  Step step_ = Step::kStart;
};

// A function posted from another thread: an alarm that is already due.
class Posted final : public Tag {
 public:
  explicit Posted(std::function<void()> fn) : fn_(std::move(fn)) {}
  void Arm(grpc::CompletionQueue* cq) { alarm_.Set(cq, gpr_now(GPR_CLOCK_MONOTONIC), this); }
  void Proceed(bool ok) override {
    if (ok) fn_();
    delete this;
  }

 private:
  std::function<void()> fn_;
  grpc::Alarm alarm_;
};

template <typename Call>
class GrpcLoop final : public LoopClients {
 public:
  GrpcLoop(int port, int streams, const ExpectedStream* expected) {
    for (int s = 0; s < streams; ++s) {
      streams_.push_back(std::make_unique<GrpcStream<Call>>(port, expected, &cq_));
    }
  }

  ~GrpcLoop() override {
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
      // Only a function posted after Stop can be left; it is dropped.
      if (auto* posted = dynamic_cast<Posted*>(static_cast<Tag*>(tag))) delete posted;
    }
  }

  void Start(int stream, const std::string& request_id, int tokens,
             std::vector<Clock::time_point>* received, Done done) override {
    streams_[static_cast<size_t>(stream)]->Start(request_id, tokens, received, std::move(done));
  }

  void Post(std::function<void()> fn) override { (new Posted(std::move(fn)))->Arm(&cq_); }

  void Run() override {
    void* tag = nullptr;
    bool ok = false;
    while (!stopped_ && cq_.Next(&tag, &ok)) static_cast<Tag*>(tag)->Proceed(ok);
  }

  void Stop() override { stopped_ = true; }

 private:
  grpc::CompletionQueue cq_;
  std::vector<std::unique_ptr<GrpcStream<Call>>> streams_;
  bool stopped_ = false;  // the loop thread's alone
};

// One HTTP stream: a kept-alive connection, one request on it at a time.
class HttpStream {
 public:
  HttpStream(net::io_context& ioc, int port, const ExpectedStream* expected)
      : expected_(*expected), port_(port), socket_(ioc) {}

  absl::Status Connect() { return ConnectToRouter(socket_, port_); }

  void Start(const std::string& request_id, int tokens, std::vector<Clock::time_point>* received,
             LoopClients::Done done) {
    request_id_ = request_id;
    done_ = std::move(done);
    check_.emplace(expected_, request_id, tokens, received);
    error_body_.clear();
    request_ = SseRequest(port_, request_id, tokens);
    http::async_write(socket_, request_, [this](beast::error_code ec, size_t) {
      if (ec) return Complete(Error("send", ec));
      parser_.emplace();
      parser_->body_limit(boost::none);
      http::async_read_header(socket_, buffer_, *parser_, [this](beast::error_code ec, size_t) {
        if (ec) return Complete(Error("response to", ec));
        ReadBody();
      });
    });
  }

 private:
  absl::Status Error(std::string_view what, const beast::error_code& ec) const {
    return absl::UnavailableError(StrCat(what, " ", request_id_, ": ", ec.message()));
  }

  void ReadBody() {
    if (parser_->is_done()) return Complete(Outcome());
    parser_->get().body().data = chunk_.data();
    parser_->get().body().size = chunk_.size();
    http::async_read_some(socket_, buffer_, *parser_, [this](beast::error_code ec, size_t) {
      const Clock::time_point t = Clock::now();
      if (ec == http::error::need_buffer) ec = {};
      if (ec) return Complete(Error("stream of", ec));
      const size_t n = chunk_.size() - parser_->get().body().size;
      if (parser_->get().result_int() != 200) {
        error_body_.append(chunk_.data(), std::min(n, kMaxErrorBody - error_body_.size()));
      } else {
        check_->OnSseBytes(std::string_view(chunk_.data(), n), t);
      }
      ReadBody();
    });
  }

  absl::Status Outcome() const {
    const unsigned status = parser_->get().result_int();
    if (status != 200) {
      return absl::InternalError(
          StrCat("request ", request_id_, ": HTTP ", status, ": ", error_body_));
    }
    BATON_RETURN_IF_ERROR(check_->Finish());
    if (!parser_->keep_alive()) return absl::InternalError("the router closed the connection");
    return absl::OkStatus();
  }

  void Complete(absl::Status s) {
    LoopClients::Done done = std::move(done_);
    done(std::move(s));
  }

  const ExpectedStream& expected_;
  int port_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;  // keeps bytes read past one response for the next
  http::request<http::string_body> request_;
  std::optional<http::response_parser<http::buffer_body>> parser_;
  std::array<char, kSseReadBytes> chunk_{};
  std::optional<StreamCheck> check_;
  std::string error_body_;
  std::string request_id_;
  LoopClients::Done done_;
};

class HttpLoop final : public LoopClients {
 public:
  absl::Status Connect(int port, int streams, const ExpectedStream* expected) {
    for (int s = 0; s < streams; ++s) {
      streams_.push_back(std::make_unique<HttpStream>(ioc_, port, expected));
      BATON_RETURN_IF_ERROR(streams_.back()->Connect());
    }
    return absl::OkStatus();
  }

  void Start(int stream, const std::string& request_id, int tokens,
             std::vector<Clock::time_point>* received, Done done) override {
    streams_[static_cast<size_t>(stream)]->Start(request_id, tokens, received, std::move(done));
  }

  void Post(std::function<void()> fn) override { net::post(ioc_, std::move(fn)); }

  void Run() override { ioc_.run(); }

  void Stop() override { ioc_.stop(); }

 private:
  net::io_context ioc_{1};  // one thread runs it
  net::executor_work_guard<net::io_context::executor_type> work_{ioc_.get_executor()};
  std::vector<std::unique_ptr<HttpStream>> streams_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<LoopClients>> LoopClients::Create(Path path, int port, int streams,
                                                                 const ExpectedStream* expected) {
  switch (path) {
    case Path::kDirect:
      return std::make_unique<GrpcLoop<DirectCall>>(port, streams, expected);
    case Path::kGrpc:
      return std::make_unique<GrpcLoop<RouterCall>>(port, streams, expected);
    case Path::kHttp: {
      auto loop = std::make_unique<HttpLoop>();
      BATON_RETURN_IF_ERROR(loop->Connect(port, streams, expected));
      return loop;
    }
  }
  return absl::InvalidArgumentError("unknown path");
}

}  // namespace baton::bench
