// The three clients of frontdoor_bench, one stream each: HTTP SSE /v1/completions and
// baton.v1 gRPC Generate through the router, and baton.internal.v1 Generate straight to
// the stub worker (the baseline). Each records when it read each content event and checks
// that every event arrived, in order, with the token the stub sent.
//
//   ExpectedStream expected = ...;  // what the stub emits, as each path shows it
//   BATON_ASSIGN_OR_RETURN(auto client, MakeStreamClient(Path::kHttp, port, &expected));
//   std::vector<Clock::time_point> received;
//   BATON_RETURN_IF_ERROR(client->Run("r1", 64, &received));
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/frontdoor_wire.h"

namespace baton::bench {

enum class Path { kDirect, kHttp, kGrpc };
std::string_view PathName(Path path);

class StreamClient {
 public:
  virtual ~StreamClient() = default;
  // Runs one request of `tokens` events and appends the time each content event was read
  // to *received. An event lost, out of order, malformed or extra is an error.
  virtual absl::Status Run(const std::string& request_id, int tokens,
                           std::vector<Clock::time_point>* received) = 0;
};

struct ClientOptions {
  // HTTP: re-arm TCP_QUICKACK after every read, so that the client never delays its ACKs.
  // A diagnosis: it hides a server that writes small chunks without TCP_NODELAY (Nagle
  // then holds each chunk until the previous one is acknowledged).
  bool http_quickack = false;
};

// `port`: the router's HTTP or gRPC port, or the stub's for Path::kDirect. Each client has
// its own connection, as separate users would. `expected` must outlive the client.
absl::StatusOr<std::unique_ptr<StreamClient>> MakeStreamClient(Path path, int port,
                                                               const ExpectedStream* expected,
                                                               const ClientOptions& options = {});

}  // namespace baton::bench
