#include "tools/bench_serve_http_client.h"

#include <chrono>
#include <set>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/tools/fake_openai_server.h"
#include "tools/bench_serve_load.h"
#include "tools/bench_serve_stats.h"

namespace baton::tools {
namespace {

using ::testing::AllOf;
using ::testing::Each;
using testing::FakeOpenAiServer;
using ::testing::Ge;
using ::testing::HasSubstr;
using ::testing::Lt;

HttpClientOptions Options(int port, OpenAiApi api = OpenAiApi::kCompletions) {
  HttpClientOptions o;
  o.api = api;
  o.url = {.host = "127.0.0.1", .port = std::to_string(port), .path = ""};
  o.path = api == OpenAiApi::kChat ? "/v1/chat/completions" : "/v1/completions";
  o.request.model = "tiny";
  o.request.timeout_s = 10;
  return o;
}

// What sleeps in a fake server guarantee whatever the scheduler does: a chunk is never
// read before it was sent. Single gaps are not bounded below (a late read of one chunk
// shortens the next gap), but their sum cannot collapse unless the first read is late.
void ExpectStreamTimes(const RequestResult& r, double first_delay, double gap) {
  const double gaps = static_cast<double>(r.itl_s.size());
  double sum = 0;
  for (double itl : r.itl_s) sum += itl;
  EXPECT_GE(r.ttft_s, first_delay);
  EXPECT_GE(r.ttft_s + sum, first_delay + gaps * gap - 1e-4);
  EXPECT_GE(sum, gaps * gap / 2);  // not all lumped at the end
  EXPECT_THAT(r.itl_s, Each(AllOf(Ge(0.0), Lt(2.0))));
  EXPECT_GE(r.e2el_s, r.ttft_s + sum);
}

BenchPrompt Prompt() {
  return BenchPrompt{
      .text = "hello there", .token_ids = {5, 6, 7}, .prompt_len = 3, .output_len = 16};
}

TEST(ParseHttpUrlTest, SplitsHostPortAndPath) {
  auto url = ParseHttpUrl("http://example.com:8000/api/");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->host, "example.com");
  EXPECT_EQ(url->port, "8000");
  EXPECT_EQ(url->path, "/api");
  url = ParseHttpUrl("http://[::1]:9000");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->port, "9000");
  url = ParseHttpUrl("http://localhost");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->port, "80");
  EXPECT_THAT(ParseHttpUrl("https://x:1").status().message(), HasSubstr("https"));
  EXPECT_THAT(ParseHttpUrl("x:1").status().message(), HasSubstr("--base-url"));
  EXPECT_FALSE(ParseHttpUrl("http://x:port").ok());
}

TEST(BuildOpenAiBodyTest, CompletionsSendIdsAndLengthControls) {
  HttpClientOptions o = Options(1);
  o.extra_body = {{"top_p", 0.5}, {"temperature", 0.7}};
  const nlohmann::json body = nlohmann::json::parse(BuildOpenAiBody(o, Prompt()));
  EXPECT_EQ(body["model"], "tiny");
  EXPECT_EQ(body["prompt"], nlohmann::json({5, 6, 7}));
  EXPECT_EQ(body["max_tokens"], 16);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["top_p"], 0.5);
  EXPECT_EQ(body["temperature"], 0.7);  // --extra-body wins

  o.request.send_token_ids = false;
  o.request.ignore_eos = false;
  const nlohmann::json text = nlohmann::json::parse(BuildOpenAiBody(o, Prompt()));
  EXPECT_EQ(text["prompt"], "hello there");
  EXPECT_FALSE(text.contains("ignore_eos"));
}

TEST(BuildOpenAiBodyTest, ChatSendsTextAsAUserMessage) {
  const nlohmann::json body =
      nlohmann::json::parse(BuildOpenAiBody(Options(1, OpenAiApi::kChat), Prompt()));
  EXPECT_FALSE(body.contains("prompt"));
  EXPECT_EQ(body["messages"],
            nlohmann::json::parse(R"([{"role":"user","content":"hello there"}])"));
  EXPECT_EQ(body["temperature"], 0.0);
}

TEST(HttpBenchClientTest, TimesAStreamedCompletion) {
  FakeOpenAiServer server({.chunks = 6,
                           .first_delay = std::chrono::milliseconds(60),
                           .chunk_delay = std::chrono::milliseconds(30),
                           .completion_tokens = 42});
  HttpClientOptions o = Options(server.port());
  o.request.api_key = "sk-test";
  HttpBenchClient client(o);
  const RequestResult r = client.Send(Prompt());
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.output_tokens, 42);  // usage wins over the 6 chunks
  EXPECT_EQ(r.prompt_tokens, 7);
  EXPECT_EQ(r.cached_tokens, 3);
  EXPECT_EQ(r.prompt_len, 3);
  ASSERT_EQ(r.itl_s.size(), 5u);
  ExpectStreamTimes(r, 0.060, 0.030);

  ASSERT_EQ(server.heads().size(), 1u);
  const std::string head = server.heads()[0];
  EXPECT_THAT(head, HasSubstr("POST /v1/completions HTTP/1.1"));
  EXPECT_THAT(head, HasSubstr("Authorization: Bearer sk-test"));
  const nlohmann::json body = nlohmann::json::parse(server.bodies()[0]);
  EXPECT_EQ(body["prompt"], nlohmann::json({5, 6, 7}));
  EXPECT_EQ(body["max_tokens"], 16);
}

TEST(HttpBenchClientTest, CountsChunksWithoutUsage) {
  FakeOpenAiServer server({.chunks = 4, .usage = false});
  HttpBenchClient client(Options(server.port()));
  const RequestResult r = client.Send(Prompt());
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.output_tokens, 4);
  EXPECT_EQ(r.prompt_tokens, -1);
  EXPECT_EQ(r.itl_s.size(), 3u);
}

TEST(HttpBenchClientTest, ChatRoleChunkIsNotTheFirstToken) {
  // The role-only chunk comes at once; the first content 80 ms later.
  FakeOpenAiServer server({.chunks = 3, .first_delay = std::chrono::milliseconds(80)});
  HttpBenchClient client(Options(server.port(), OpenAiApi::kChat));
  const RequestResult r = client.Send(Prompt());
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_GE(r.ttft_s, 0.080);
  EXPECT_EQ(r.itl_s.size(), 2u);
  EXPECT_THAT(server.heads()[0], HasSubstr("POST /v1/chat/completions"));
  EXPECT_EQ(nlohmann::json::parse(server.bodies()[0])["messages"][0]["content"], "hello there");
}

TEST(HttpBenchClientTest, ByteByByteWritesWithoutChunkedEncoding) {
  // Every TCP segment holds one byte, and the body ends when the connection closes.
  FakeOpenAiServer server({.chunks = 5,
                           .completion_tokens = 5,
                           .chunked = false,
                           .write_piece = 1,
                           .piece_delay = std::chrono::microseconds(50)});
  HttpBenchClient client(Options(server.port()));
  const RequestResult r = client.Send(Prompt());
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.output_tokens, 5);
  EXPECT_EQ(r.itl_s.size(), 4u);
}

TEST(HttpBenchClientTest, SmallPiecesOfChunkedEncoding) {
  FakeOpenAiServer server({.chunks = 5, .usage = false, .write_piece = 3});
  HttpBenchClient client(Options(server.port(), OpenAiApi::kChat));
  for (int i = 0; i < 3; ++i) {
    const RequestResult r = client.Send(Prompt());
    ASSERT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.output_tokens, 5);
  }
  EXPECT_EQ(server.connections(), 1);  // kept alive and reused
}

TEST(HttpBenchClientTest, HttpErrorFailsWithTheServersMessage) {
  FakeOpenAiServer server(
      {.status = 400,
       .error_body = R"({"error":{"message":"max_tokens must be at most 512","type":"invalid"}})"});
  HttpBenchClient client(Options(server.port()));
  const RequestResult r = client.Send(Prompt());
  EXPECT_FALSE(r.success);
  EXPECT_THAT(r.error, HasSubstr("HTTP 400"));
  EXPECT_THAT(r.error, HasSubstr("max_tokens must be at most 512"));
  // The connection stays usable after an error response.
  EXPECT_FALSE(client.Send(Prompt()).success);
  EXPECT_EQ(server.connections(), 1);
}

TEST(HttpBenchClientTest, ErrorEventInTheStreamFails) {
  FakeOpenAiServer server({.chunks = 2, .error_event = "the worker died"});
  HttpBenchClient client(Options(server.port()));
  const RequestResult r = client.Send(Prompt());
  EXPECT_FALSE(r.success);
  EXPECT_THAT(r.error, HasSubstr("the worker died"));
}

TEST(HttpBenchClientTest, StreamWithoutDoneFails) {
  FakeOpenAiServer server({.chunks = 2, .done = false, .chunked = false});
  HttpBenchClient client(Options(server.port()));
  const RequestResult r = client.Send(Prompt());
  EXPECT_FALSE(r.success);
  EXPECT_THAT(r.error, HasSubstr("[DONE]"));
}

TEST(HttpBenchClientTest, NonStreamingResponseFails) {
  FakeOpenAiServer server({.chunks = 1, .content_type = "application/json"});
  HttpBenchClient client(Options(server.port()));
  const RequestResult r = client.Send(Prompt());
  EXPECT_FALSE(r.success);
  EXPECT_THAT(r.error, HasSubstr("application/json"));
}

TEST(HttpBenchClientTest, TimeoutFails) {
  FakeOpenAiServer server({.chunks = 1, .first_delay = std::chrono::milliseconds(1500)});
  HttpClientOptions o = Options(server.port());
  o.request.timeout_s = 0.2;
  HttpBenchClient client(o);
  const RequestResult r = client.Send(Prompt());
  EXPECT_FALSE(r.success);
  EXPECT_THAT(r.error, HasSubstr("timed out"));
  EXPECT_LT(r.e2el_s, 1.0);
}

TEST(HttpBenchClientTest, RefusedConnectionFails) {
  int port;
  {
    FakeOpenAiServer gone({});
    port = gone.port();
  }
  HttpBenchClient client(Options(port));
  const RequestResult r = client.Send(Prompt());
  EXPECT_FALSE(r.success);
  EXPECT_THAT(r.error, HasSubstr("cannot connect"));
}

TEST(HttpBenchClientTest, RetriesWhenAnIdleConnectionWasClosed) {
  FakeOpenAiServer server({.chunks = 2, .close_after_response = true});
  HttpBenchClient client(Options(server.port()));
  ASSERT_TRUE(client.Send(Prompt()).success);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // the server closes it
  const RequestResult r = client.Send(Prompt());
  EXPECT_TRUE(r.success) << r.error;
  EXPECT_EQ(server.connections(), 2);
  EXPECT_EQ(server.requests(), 2);  // the request reached the server once
}

TEST(HttpBenchClientTest, FetchesTheFirstModel) {
  FakeOpenAiServer server({});
  HttpBenchClient client(Options(server.port()));
  auto model = client.FetchFirstModel();
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(*model, "fake-model");
}

TEST(HttpBenchClientTest, MaxConcurrencyIsNeverExceeded) {
  FakeOpenAiServer server({.chunks = 4,
                           .first_delay = std::chrono::milliseconds(30),
                           .chunk_delay = std::chrono::milliseconds(10)});
  HttpBenchClient client(Options(server.port()));
  std::vector<BenchPrompt> prompts(12, Prompt());
  LoadOptions load;
  load.max_concurrency = 3;
  // Every request ends on the client's one loop thread, not on a thread of its own.
  std::set<std::thread::id> threads;
  load.on_done = [&](int64_t, int64_t, double) { threads.insert(std::this_thread::get_id()); };
  auto run = RunLoad(client, prompts, load);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(threads.size(), 1u);
  EXPECT_FALSE(threads.contains(std::this_thread::get_id()));
  for (const RequestResult& r : run->results) EXPECT_TRUE(r.success) << r.error;
  EXPECT_EQ(server.requests(), 12);
  EXPECT_EQ(server.max_active(), 3);
  EXPECT_LE(PeakConcurrency(run->results), 3);
  EXPECT_LE(server.connections(), 3);
}

}  // namespace
}  // namespace baton::tools
