// The wire form of the group store served over TCP (parallel/tcp_store.h). A frame is a
// little-endian u32 length of what follows, then that many bytes:
//
//   request  := u8 op, body
//     kHello: the group's token (the rest of the frame)      first, and only first
//     kSet:   u16 key length, key, value (the rest)
//     kGet:   u32 wait in ms, u16 key length, key
//   response := u8 code (absl::StatusCode), payload: the value for a Get, else a message
//
// The server reads frames from any host that can reach the leader's port: every field
// is bounded before use (StoreFrameLimits), and bytes that are not a well-formed request
// are InvalidArgument naming what is wrong. tests/fuzz/fuzz_store_frame.cc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/secret_token.h"

namespace baton::parallel {

enum class StoreOp : uint8_t { kHello = 1, kSet = 2, kGet = 3 };

struct StoreFrameLimits {
  static constexpr size_t kMaxKeyBytes = 256;
  static constexpr size_t kMaxValueBytes = size_t{1} << 20;
  static constexpr size_t kMaxTokenBytes = ::baton::kMaxTokenBytes;
  static constexpr uint32_t kMaxWaitMs = 10 * 60 * 1000;
  // The largest frame body either side accepts: a Set of the largest key and value.
  static constexpr size_t kMaxFrameBytes = 1 + 2 + kMaxKeyBytes + kMaxValueBytes;
};

struct StoreRequest {
  StoreOp op = StoreOp::kGet;
  std::string token;     // kHello
  std::string key;       // kSet, kGet
  std::string value;     // kSet
  uint32_t wait_ms = 0;  // kGet
};

struct StoreResponse {
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string payload;
};

// A frame's body (without its length prefix).
std::string EncodeStoreRequest(const StoreRequest& request);
absl::StatusOr<StoreRequest> DecodeStoreRequest(std::string_view body);
std::string EncodeStoreResponse(const StoreResponse& response);
absl::StatusOr<StoreResponse> DecodeStoreResponse(std::string_view body);

// The u32 length prefix of a frame of `body_bytes`.
std::string FrameHeader(size_t body_bytes);

}  // namespace baton::parallel
