// The worker's gRPC services over a real server on 127.0.0.1 and real gRPC clients:
// generations equal the single-sequence path, client cancellation frees the request in
// the engine, bad requests get INVALID_ARGUMENT, KV events stream and match snapshots.
#include "worker/worker_service.h"

#include <chrono>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/generator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/kv_event_proto.h"

namespace baton::worker {
namespace {

namespace pb = ::baton::internal::v1;
using ::testing::HasSubstr;

class WorkerServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = engine::LoadModel(std::string(BATON_SOURCE_DIR) + "/models/baton-tiny");
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = new engine::LoadedModel(std::move(*m));
  }

  void SetUp() override {
    engine::EngineOptions o;
    o.threads = 2;
    o.kv_cache_bytes = int64_t{32} << 20;
    auto e = engine::Engine::Create(model_, o);
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = std::move(*e);
    service_ = std::make_unique<WorkerService>(engine_.get());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_->worker());
    builder.RegisterService(service_->kv_events());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    target_ = "127.0.0.1:" + std::to_string(port);
    channel_ = grpc::CreateChannel(target_, grpc::InsecureChannelCredentials());
    worker_ = pb::Worker::NewStub(channel_);
    events_ = pb::KvEvents::NewStub(channel_);
  }

  void TearDown() override {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    server_.reset();
    service_.reset();
    engine_.reset();
  }

  pb::GetStatsResponse Stats() {
    grpc::ClientContext ctx;
    pb::GetStatsResponse out;
    EXPECT_TRUE(worker_->GetStats(&ctx, {}, &out).ok());
    return out;
  }

  static pb::GenerateRequest Request(int i) {
    pb::GenerateRequest r;
    r.set_request_id("req-" + std::to_string(i));
    for (int k = 0; k < 20 + 7 * i; ++k) r.add_prompt_ids(5 + (k * 31 + i) % 1000);
    r.mutable_params()->set_max_tokens(12 + 3 * i);
    r.mutable_params()->set_seed(100 + i);
    if (i % 2 == 0) r.mutable_params()->set_temperature(0);
    r.mutable_params()->set_logprobs(1);
    r.set_detokenize(true);
    return r;
  }

  static engine::LoadedModel* model_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<WorkerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string target_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Worker::Stub> worker_;
  std::unique_ptr<pb::KvEvents::Stub> events_;
};

engine::LoadedModel* WorkerServiceTest::model_ = nullptr;

TEST_F(WorkerServiceTest, ConcurrentCallsMatchTheSingleSequencePath) {
  constexpr int kCalls = 6;
  std::vector<std::vector<int32_t>> ids(kCalls);
  std::vector<std::string> text(kCalls);
  std::vector<pb::GenerateResponse> last(kCalls);
  std::vector<std::thread> clients;
  for (int i = 0; i < kCalls; ++i) {
    clients.emplace_back([&, i] {
      grpc::ClientContext ctx;
      auto reader = worker_->Generate(&ctx, Request(i));
      pb::GenerateResponse r;
      while (reader->Read(&r)) {
        ids[i].insert(ids[i].end(), r.token_ids().begin(), r.token_ids().end());
        text[i] += r.text();
        EXPECT_EQ(r.logprobs_size(), r.token_ids_size());
        last[i] = r;
      }
      EXPECT_TRUE(reader->Finish().ok());
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < kCalls; ++i) {
    auto req = FromProto(Request(i));
    ASSERT_TRUE(req.ok());
    ThreadPool threads(1);
    auto alone = engine::Generate(*model_, &threads, req->prompt_ids, req->params, {}, nullptr);
    ASSERT_TRUE(alone.ok()) << alone.status();
    EXPECT_EQ(ids[i], alone->output_ids) << i;
    EXPECT_EQ(text[i], alone->text) << i;
    EXPECT_TRUE(last[i].finished());
    EXPECT_EQ(last[i].finish_reason(), alone->finish_reason);
    EXPECT_EQ(last[i].usage().prompt_tokens(), req->prompt_ids.size());
    EXPECT_EQ(last[i].usage().completion_tokens(), static_cast<int64_t>(ids[i].size()));
  }
}

TEST_F(WorkerServiceTest, ClientCancellationCancelsInTheEngine) {
  pb::GenerateRequest r = Request(1);
  r.mutable_params()->set_max_tokens(400);
  r.mutable_params()->set_ignore_eos(true);
  grpc::ClientContext ctx;
  auto reader = worker_->Generate(&ctx, r);
  pb::GenerateResponse first;
  ASSERT_TRUE(reader->Read(&first));
  ctx.TryCancel();
  while (reader->Read(&first)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  pb::GetStatsResponse s;
  for (int i = 0; i < 200; ++i) {  // the engine drops it at its next step
    s = Stats();
    if (s.requests_cancelled() == 1 && s.running() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(s.requests_cancelled(), 1);
  EXPECT_EQ(s.running(), 0);
  EXPECT_EQ(s.pages_used(), 0);
  EXPECT_LT(s.generated_tokens(), 400);
}

TEST_F(WorkerServiceTest, BadRequestsAreInvalidArgument) {
  pb::GenerateRequest r = Request(0);
  r.mutable_params()->set_top_p(3);
  grpc::ClientContext ctx;
  auto reader = worker_->Generate(&ctx, r);
  pb::GenerateResponse out;
  EXPECT_FALSE(reader->Read(&out));
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("top_p"));

  pb::GenerateRequest empty;
  grpc::ClientContext ctx2;
  auto reader2 = worker_->Generate(&ctx2, empty);
  EXPECT_FALSE(reader2->Read(&out));
  s = reader2->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("empty"));
}

TEST_F(WorkerServiceTest, KvEventsStreamAndMatchTheSnapshot) {
  grpc::ClientContext sub_ctx;
  auto sub = events_->Subscribe(&sub_ctx, {});
  // Run a request whose prompt fills whole blocks.
  grpc::ClientContext ctx;
  auto reader = worker_->Generate(&ctx, Request(3));
  pb::GenerateResponse r;
  while (reader->Read(&r)) {
  }
  ASSERT_TRUE(reader->Finish().ok());
  std::set<kvcache::BlockHash> from_events;
  uint64_t last_seq = 0;
  pb::KvEventBatch batch;
  // The request's prompt (41 tokens) and output give at least 2 full blocks.
  while (from_events.size() < 2 && sub->Read(&batch)) {
    auto b = kvcache::FromProto(batch);
    ASSERT_TRUE(b.ok()) << b.status();
    last_seq = b->sequence;
    for (const auto& e : b->events) {
      if (e.type == kvcache::KvEvent::Type::kBlockStored) {
        from_events.insert(e.block_hashes.begin(), e.block_hashes.end());
      }
    }
  }
  sub_ctx.TryCancel();
  grpc::ClientContext snap_ctx;
  pb::KvSnapshot snap;
  ASSERT_TRUE(events_->GetSnapshot(&snap_ctx, {}, &snap).ok());
  auto s = kvcache::FromProto(snap);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_GE(s->sequence, last_seq);
  for (const auto& h : from_events) {
    EXPECT_TRUE(std::binary_search(s->block_hashes.begin(), s->block_hashes.end(), h));
  }
  EXPECT_EQ(static_cast<int64_t>(s->block_hashes.size()), Stats().pages_cached());
}

int ThreadCount() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++n;
  }
  return n;
}

// Generate streams have no thread of their own: 64 open streams, each past its first
// token, leave the process's thread count where one stream left it. (The synchronous
// server this replaced ran one thread per open stream.) The client is one completion
// queue drained by this thread.
TEST_F(WorkerServiceTest, SixtyFourStreamsAddNoThreads) {
  constexpr int kStreams = 64;
  grpc::CompletionQueue cq;
  struct Call {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientAsyncReader<pb::GenerateResponse>> reader;
    pb::GenerateResponse msg;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Call>> calls;
  auto wait_for = [&](void* tag) {
    void* got = nullptr;
    bool ok = false;
    while (cq.Next(&got, &ok)) {
      if (got == tag) return ok;
    }
    return false;
  };
  auto open = [&](int i) {
    auto call = std::make_unique<Call>();
    pb::GenerateRequest r = Request(i % 4);
    r.set_request_id("many-" + std::to_string(i));
    r.mutable_params()->set_max_tokens(400);
    r.mutable_params()->set_ignore_eos(true);
    call->reader = worker_->PrepareAsyncGenerate(&call->ctx, r, &cq);
    call->reader->StartCall(call.get());
    EXPECT_TRUE(wait_for(call.get()));
    call->reader->Read(&call->msg, call.get());
    EXPECT_TRUE(wait_for(call.get())) << i;  // the first token arrived
    calls.push_back(std::move(call));
  };
  open(0);
  const int with_one = ThreadCount();
  for (int i = 1; i < kStreams; ++i) open(i);
  const int with_all = ThreadCount();
  EXPECT_EQ(Stats().running() + Stats().waiting(), kStreams);
  // gRPC may add a poller or two as load grows; a thread per stream would add 63.
  EXPECT_LE(with_all - with_one, 4)
      << with_one << " threads with one stream, " << with_all << " with " << kStreams;
  for (auto& call : calls) call->ctx.TryCancel();
  for (auto& call : calls) {
    call->reader->Finish(&call->status, call.get());
    while (!wait_for(call.get())) {
    }
  }
  cq.Shutdown();
}

// A client that reads slower than the engine steps gets several steps' tokens per message
// (so no backlog of messages grows), and still exactly the tokens of the single-sequence
// path. The client's receive window is kept small so that the server's writes wait for it.
TEST_F(WorkerServiceTest, ASlowReaderGetsSeveralTokensPerMessage) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  auto channel = grpc::CreateCustomChannel(target_, grpc::InsecureChannelCredentials(), args);
  auto stub = pb::Worker::NewStub(channel);
  pb::GenerateRequest r = Request(2);
  r.mutable_params()->set_max_tokens(300);
  r.mutable_params()->set_ignore_eos(true);
  r.mutable_params()->set_logprobs(20);
  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, r);
  pb::GenerateResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  std::vector<int32_t> ids(msg.token_ids().begin(), msg.token_ids().end());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the engine runs ahead
  int messages = 1;
  while (reader->Read(&msg)) {
    ++messages;
    ids.insert(ids.end(), msg.token_ids().begin(), msg.token_ids().end());
    EXPECT_EQ(msg.logprobs_size(), msg.token_ids_size());
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(msg.finished());
  EXPECT_EQ(msg.usage().completion_tokens(), 300);
  ASSERT_EQ(ids.size(), 300u);
  EXPECT_LT(messages, 300);

  auto req = FromProto(r);
  ASSERT_TRUE(req.ok());
  ThreadPool threads(1);
  auto alone = engine::Generate(*model_, &threads, req->prompt_ids, req->params, {}, nullptr);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(ids, alone->output_ids);
}

}  // namespace
}  // namespace baton::worker
