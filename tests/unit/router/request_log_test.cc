// The --log-requests line: one JSON object per request, whole, whatever the client's bytes.
#include "frontdoor/openai/request_log.h"

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace baton::router {
namespace {

frontdoor::RequestRecord Record() {
  frontdoor::RequestRecord r;
  r.api = "grpc";
  r.request_id = "client-7";
  r.worker_request_id = "gen-1";
  r.status = "OK";
  r.policy = "baton";
  r.worker = "10.0.0.2:50061";
  r.prefill_worker = "10.0.0.1:50061";
  r.prompt_tokens = 104;
  r.expected_cached_tokens = 96;
  r.cached_tokens = 80;
  r.completion_tokens = 2;
  r.timings.route_seconds = 0.000125;
  r.timings.prefill_seconds = 0.5;
  r.timings.total_seconds = 0.75;
  return r;
}

TEST(RequestLogTest, ARecordIsOneJsonObjectWithEveryField) {
  const nlohmann::json j = nlohmann::json::parse(frontdoor::RequestRecordJson(Record()));
  EXPECT_EQ(j["api"], "grpc");
  EXPECT_EQ(j["request_id"], "client-7");
  EXPECT_EQ(j["worker_request_id"], "gen-1");
  EXPECT_EQ(j["worker"], "10.0.0.2:50061");
  EXPECT_EQ(j["prefill_worker"], "10.0.0.1:50061");
  EXPECT_EQ(j["expected_cached_tokens"], 96);
  EXPECT_EQ(j["cached_tokens"], 80);
  EXPECT_EQ(j["rerouted"], false);
  EXPECT_EQ(j["seconds"]["route"], 0.000125);
  EXPECT_EQ(j["seconds"]["prefill"], 0.5);
  EXPECT_EQ(j["seconds"].size(), 9U);
}

TEST(RequestLogTest, InvalidUtf8FromTheClientIsReplacedNotThrown) {
  frontdoor::RequestRecord r = Record();
  r.request_id = "bad\xC3\x28id\n";
  const std::string line = frontdoor::RequestRecordJson(r);
  EXPECT_EQ(line.find('\n'), std::string::npos) << "one line per request";
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["request_id"], "bad\xEF\xBF\xBD(id\n");
}

TEST(RequestLogTest, ConcurrentWritersNeverInterleaveLines) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    frontdoor::RequestLog log(true, f);
    std::vector<std::thread> writers;
    for (int t = 0; t < 4; ++t) {
      writers.emplace_back([&log] {
        for (int i = 0; i < 200; ++i) log.Write(Record());
      });
    }
    for (std::thread& w : writers) w.join();
  }
  std::rewind(f);
  char buf[4096];
  int lines = 0;
  while (std::fgets(buf, sizeof(buf), f) != nullptr) {
    EXPECT_TRUE(nlohmann::json::accept(std::string(buf))) << buf;
    ++lines;
  }
  std::fclose(f);
  EXPECT_EQ(lines, 800);
}

TEST(RequestLogTest, ADisabledLogWritesNothing) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  frontdoor::RequestLog log(false, f);
  log.Write(Record());
  EXPECT_EQ(std::ftell(f), 0);
  std::fclose(f);
}

}  // namespace
}  // namespace baton::router
