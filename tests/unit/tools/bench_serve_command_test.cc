#include "tools/bench_serve_command.h"

#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/tools/fake_openai_server.h"

namespace baton::tools {
namespace {

using testing::FakeOpenAiServer;
using ::testing::HasSubstr;

// Parses `baton bench serve ARGS` as main() does and runs the command; returns what
// CLI11 threw ("" when nothing), with stderr in *err.
std::string RunCli(std::vector<std::string> args, std::string* err = nullptr) {
  CLI::App app{"baton"};
  app.require_subcommand(1);
  AddBenchCommand(app);
  args.insert(args.begin(), {"bench", "serve"});
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
  ::testing::internal::CaptureStderr();
  std::string thrown;
  try {
    app.parse(args);
  } catch (const CLI::Error& e) {
    thrown = e.get_name() + ": " + e.what();
  }
  const std::string captured = ::testing::internal::GetCapturedStderr();
  if (err != nullptr) *err = captured;
  return thrown;
}

TEST(BenchServeCommandTest, HelpDocumentsEveryFlag) {
  CLI::App app{"baton"};
  AddBenchCommand(app);
  const std::string help = app.get_subcommand("bench")->get_subcommand("serve")->help();
  for (const char* flag : {"--backend",
                           "--base-url",
                           "--host",
                           "--port",
                           "--endpoint",
                           "--grpc-target",
                           "--grpc-channels",
                           "--model",
                           "--api-key",
                           "--tokenizer",
                           "--dataset",
                           "--num-prompts",
                           "--seed",
                           "--random-input-len",
                           "--random-output-len",
                           "--random-range-ratio",
                           "--num-prefixes",
                           "--prefix-len",
                           "--request-rate",
                           "--burstiness",
                           "--max-concurrency",
                           "--request-timeout",
                           "--temperature",
                           "--ignore-eos",
                           "--no-ignore-eos",
                           "--send-text",
                           "--extra-body",
                           "--percentiles",
                           "--goodput",
                           "--result-file",
                           "--save-detailed",
                           "--no-test-request",
                           "--quiet"}) {
    EXPECT_THAT(help, HasSubstr(flag));
  }
}

TEST(BenchServeCommandTest, BadFlagsNameTheFlag) {
  EXPECT_THAT(RunCli({"--backend", "vllm"}), HasSubstr("--backend"));
  EXPECT_THAT(RunCli({"--request-rate", "0"}), HasSubstr("--request-rate"));
  EXPECT_THAT(RunCli({"--random-range-ratio", "1.5"}), HasSubstr("--random-range-ratio"));
  EXPECT_THAT(RunCli({"--num-prompts", "0"}), HasSubstr("--num-prompts"));
  EXPECT_THAT(RunCli({"--dataset", "sharegpt"}), HasSubstr("--dataset"));
  EXPECT_THAT(RunCli({"--max-concurrency", "-1"}), HasSubstr("--max-concurrency"));
  EXPECT_THAT(RunCli({"--port", "70000"}), HasSubstr("--port"));
  std::string err;
  EXPECT_THAT(RunCli({"--goodput", "itl:5"}, &err), HasSubstr("RuntimeError"));
  EXPECT_THAT(err, HasSubstr("--goodput"));
  RunCli({"--percentiles", "50,x"}, &err);
  EXPECT_THAT(err, HasSubstr("--percentiles"));
  RunCli({"--base-url", "ftp://x"}, &err);
  EXPECT_THAT(err, HasSubstr("--base-url"));
  RunCli({"--extra-body", "[1]", "--model", "m"}, &err);
  EXPECT_THAT(err, HasSubstr("--extra-body"));
  RunCli({"--tokenizer", "/nonexistent/tok.json"}, &err);
  EXPECT_THAT(err, HasSubstr("--tokenizer"));
}

TEST(BenchServeCommandTest, UnreachableServerFailsTheTestRequest) {
  int port;
  {
    FakeOpenAiServer gone({});
    port = gone.port();
  }
  std::string err;
  EXPECT_THAT(RunCli({"--port", std::to_string(port), "--model", "m", "--num-prompts", "3"}, &err),
              HasSubstr("RuntimeError"));
  EXPECT_THAT(err, HasSubstr("test request failed"));
  EXPECT_THAT(err, HasSubstr("cannot connect"));
}

TEST(BenchServeCommandTest, RunsAgainstAServerAndWritesResults) {
  FakeOpenAiServer server({.chunks = 3,
                           .chunk_delay = std::chrono::milliseconds(2),
                           .prompt_tokens = 9,
                           .completion_tokens = 4});
  const std::string result_file =
      ::testing::TempDir() + "/bench_serve_" + std::to_string(getpid()) + ".json";
  ::testing::internal::CaptureStdout();
  const std::string thrown = RunCli({"--port",
                                     std::to_string(server.port()),
                                     "--num-prompts",
                                     "10",
                                     "--tokenizer",
                                     BATON_SOURCE_DIR "/models/baton-tiny",
                                     "--random-input-len",
                                     "20",
                                     "--random-output-len",
                                     "4",
                                     "--max-concurrency",
                                     "3",
                                     "--request-rate",
                                     "200",
                                     "--percentiles",
                                     "50,90",
                                     "--goodput",
                                     "ttft:10000",
                                     "--result-file",
                                     result_file,
                                     "--save-detailed",
                                     "--quiet"});
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(thrown, "");
  EXPECT_THAT(out, HasSubstr("Serving Benchmark Result"));
  EXPECT_THAT(out, HasSubstr("P90 TTFT (ms):"));
  EXPECT_THAT(out, HasSubstr("Request goodput (req/s):"));
  EXPECT_LE(server.max_active(), 3);
  // The model came from /v1/models; the test request plus ten.
  EXPECT_EQ(server.requests(), 12);
  for (const std::string& body : server.bodies()) {
    if (body.empty()) continue;  // the GET
    const nlohmann::json j = nlohmann::json::parse(body);
    EXPECT_EQ(j["model"], "fake-model");
    ASSERT_TRUE(j["prompt"].is_array());
    EXPECT_EQ(j["prompt"].size(), 20u);  // exact token ids
    EXPECT_EQ(j["max_tokens"], 4);
  }

  std::ifstream in(result_file);
  ASSERT_TRUE(in.good());
  const nlohmann::json doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["completed"], 10);
  EXPECT_EQ(doc["failed"], 0);
  EXPECT_EQ(doc["total_input_tokens"], 90);
  EXPECT_EQ(doc["total_output_tokens"], 40);
  EXPECT_EQ(doc["total_cached_tokens"], 30);
  EXPECT_EQ(doc["request_rate"], 200.0);
  EXPECT_EQ(doc["max_concurrency"], 3);
  EXPECT_EQ(doc["request_goodput"], doc["request_throughput"]);
  EXPECT_TRUE(doc.contains("p90_itl_ms"));
  EXPECT_TRUE(doc.contains("median_e2el_ms"));
  EXPECT_EQ(doc["ttfts"].size(), 10u);
  EXPECT_EQ(doc["itls"][0].size(), 2u);
  EXPECT_LE(doc["max_concurrent_requests"], 3);
  std::remove(result_file.c_str());
}

}  // namespace
}  // namespace baton::tools
