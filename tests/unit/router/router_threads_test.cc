// The router's gRPC work stays on its own loops (dispatch/completion_loops.h): after HTTP
// and gRPC requests through a real RouterServer, no thread of gRPC's callback machinery
// ("nexting_thread") exists in the process. Such threads poll every socket in the process
// and hand each token's read to another thread (docs/perf/frontdoor.md, "One loop").
#include <dirent.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "baton/internal/v1/worker.grpc.pb.h"
#include "baton/v1/baton.grpc.pb.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http/read.hpp"
#include "boost/beast/http/string_body.hpp"
#include "boost/beast/http/write.hpp"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "router/router_server.h"
#include "service/health_service.h"
#include "tokenizer/loader.h"

namespace baton::router {
namespace {

namespace ipb = ::baton::internal::v1;
namespace http = boost::beast::http;

constexpr char kModel[] = BATON_SOURCE_DIR "/models/baton-tiny";

// A worker that streams the same few tokens for every request.
class TokenWorker final : public ipb::Worker::Service {
 public:
  explicit TokenWorker(std::vector<int32_t> ids, int32_t vocab)
      : ids_(std::move(ids)), vocab_(vocab) {}

  grpc::Status Generate(grpc::ServerContext*, const ipb::GenerateRequest* req,
                        grpc::ServerWriter<ipb::GenerateResponse>* writer) override {
    for (size_t i = 0; i < ids_.size(); ++i) {
      ipb::GenerateResponse msg;
      msg.add_token_ids(ids_[i]);
      if (i + 1 == ids_.size()) {
        msg.set_finished(true);
        msg.set_finish_reason("length");
        msg.mutable_usage()->set_prompt_tokens(req->prompt_ids_size());
        msg.mutable_usage()->set_completion_tokens(static_cast<int64_t>(ids_.size()));
      }
      if (!writer->Write(msg)) return grpc::Status(grpc::StatusCode::CANCELLED, "gone");
    }
    return grpc::Status::OK;
  }

  grpc::Status GetModelInfo(grpc::ServerContext*, const ipb::GetModelInfoRequest*,
                            ipb::GetModelInfoResponse* out) override {
    out->set_model_id("tiny");
    out->set_architecture("llama");
    out->set_max_model_len(512);
    out->set_vocab_size(vocab_);
    out->set_block_size(16);
    out->set_block_hash_spec_version(1);
    return grpc::Status::OK;
  }

 private:
  std::vector<int32_t> ids_;
  int32_t vocab_;
};

std::vector<std::string> ThreadNames() {
  std::vector<std::string> names;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return names;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(comm, name);
    names.push_back(name);
  }
  closedir(dir);
  return names;
}

TEST(RouterThreadsTest, NoCallbackPollingThreadsAfterHttpAndGrpcRequests) {
  auto files = tokenizer::LoadTokenizerFiles(kModel);
  ASSERT_TRUE(files.ok()) << files.status();
  const std::vector<int32_t> ids =
      files->tokenizer->Encode(" once upon a time", {.add_special_tokens = false}).value();
  TokenWorker worker(ids, files->tokenizer->vocab_size());
  service::HealthService health({""});
  grpc::EnableDefaultHealthCheckService(false);
  grpc::ServerBuilder builder;
  int worker_port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &worker_port);
  builder.RegisterService(&worker);
  builder.RegisterService(&health);
  std::unique_ptr<grpc::Server> worker_server = builder.BuildAndStart();
  ASSERT_NE(worker_port, 0);

  RouterOptions options;
  options.worker = "127.0.0.1:" + std::to_string(worker_port);
  options.tokenizer = kModel;
  options.http_port = 0;
  options.grpc_port = 0;
  options.worker_wait = absl::Seconds(10);
  auto router = RouterServer::Start(options);
  ASSERT_TRUE(router.ok()) << router.status();

  // gRPC: baton.v1 Generate with a plain synchronous client.
  auto stub = baton::v1::Baton::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string((*router)->grpc_port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  baton::v1::GenerateRequest req;
  req.set_text("hello");
  req.mutable_stop()->set_max_tokens(8);
  auto reader = stub->Generate(&ctx, req);
  std::string text;
  baton::v1::GenerateResponse msg;
  while (reader->Read(&msg)) text += msg.text();
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(text, " once upon a time");

  // HTTP: a streamed completion, read to its end.
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket socket(ioc);
  socket.connect({boost::asio::ip::make_address_v4("127.0.0.1"),
                  static_cast<uint16_t>((*router)->http_port())});
  http::request<http::string_body> post{http::verb::post, "/v1/completions", 11};
  post.set(http::field::host, "127.0.0.1");
  post.set(http::field::content_type, "application/json");
  post.body() = R"({"model":"tiny","prompt":"hello","max_tokens":8,"stream":true})";
  post.prepare_payload();
  http::write(socket, post);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(socket, buffer, res);
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_NE(res.body().find(" upon"), std::string::npos) << res.body();
  EXPECT_NE(res.body().find("[DONE]"), std::string::npos) << res.body();

  for (const std::string& name : ThreadNames()) EXPECT_NE(name, "nexting_thread");
  (*router)->Shutdown(absl::ZeroDuration());
  health.Shutdown();
  worker_server->Shutdown(std::chrono::system_clock::now());
}

}  // namespace
}  // namespace baton::router
