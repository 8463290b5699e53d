#include "parallel/store_frame.h"

#include <cstring>

#include "common/strings.h"

namespace baton::parallel {
namespace {

void PutU16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v & 0xff));
  out->push_back(static_cast<char>(v >> 8));
}
void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Reads fixed-size little-endian fields off the front of `in`.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool U16(uint16_t* v) {
    if (in_.size() < 2) return false;
    *v = static_cast<uint16_t>(Byte(0) | (Byte(1) << 8));
    in_.remove_prefix(2);
    return true;
  }
  bool U32(uint32_t* v) {
    if (in_.size() < 4) return false;
    *v = Byte(0) | (Byte(1) << 8) | (Byte(2) << 16) | (Byte(3) << 24);
    in_.remove_prefix(4);
    return true;
  }
  bool Bytes(size_t n, std::string* out) {
    if (in_.size() < n) return false;
    out->assign(in_.substr(0, n));
    in_.remove_prefix(n);
    return true;
  }
  std::string_view rest() const { return in_; }

 private:
  uint32_t Byte(size_t i) const { return static_cast<uint8_t>(in_[i]); }
  std::string_view in_;
};

absl::Status CheckKey(const std::string& key) {
  if (key.empty() || key.size() > StoreFrameLimits::kMaxKeyBytes) {
    return absl::InvalidArgumentError(StrCat("group store: a key is ", key.size(),
                                             " bytes; it must be 1 to ",
                                             StoreFrameLimits::kMaxKeyBytes));
  }
  return absl::OkStatus();
}

}  // namespace

std::string FrameHeader(size_t body_bytes) {
  std::string out;
  PutU32(&out, static_cast<uint32_t>(body_bytes));
  return out;
}

std::string EncodeStoreRequest(const StoreRequest& r) {
  std::string out;
  out.push_back(static_cast<char>(r.op));
  switch (r.op) {
    case StoreOp::kHello:
      out += r.token;
      break;
    case StoreOp::kSet:
      PutU16(&out, static_cast<uint16_t>(r.key.size()));
      out += r.key;
      out += r.value;
      break;
    case StoreOp::kGet:
      PutU32(&out, r.wait_ms);
      PutU16(&out, static_cast<uint16_t>(r.key.size()));
      out += r.key;
      break;
  }
  return out;
}

absl::StatusOr<StoreRequest> DecodeStoreRequest(std::string_view body) {
  if (body.empty()) return absl::InvalidArgumentError("group store: an empty request frame");
  if (body.size() > StoreFrameLimits::kMaxFrameBytes) {
    return absl::InvalidArgumentError(StrCat("group store: a request frame is ", body.size(),
                                             " bytes; the limit is ",
                                             StoreFrameLimits::kMaxFrameBytes));
  }
  StoreRequest r;
  const uint8_t op = static_cast<uint8_t>(body[0]);
  Reader in(body.substr(1));
  switch (op) {
    case static_cast<uint8_t>(StoreOp::kHello):
      r.op = StoreOp::kHello;
      r.token.assign(in.rest());
      if (r.token.empty() || r.token.size() > StoreFrameLimits::kMaxTokenBytes) {
        return absl::InvalidArgumentError(StrCat("group store: a token is ", r.token.size(),
                                                 " bytes; it must be 1 to ",
                                                 StoreFrameLimits::kMaxTokenBytes));
      }
      return r;
    case static_cast<uint8_t>(StoreOp::kSet): {
      r.op = StoreOp::kSet;
      uint16_t n = 0;
      if (!in.U16(&n) || !in.Bytes(n, &r.key)) {
        return absl::InvalidArgumentError("group store: a Set frame ends inside its key");
      }
      if (absl::Status s = CheckKey(r.key); !s.ok()) return s;
      r.value.assign(in.rest());
      if (r.value.size() > StoreFrameLimits::kMaxValueBytes) {
        return absl::InvalidArgumentError(StrCat("group store: a value is ", r.value.size(),
                                                 " bytes; the limit is ",
                                                 StoreFrameLimits::kMaxValueBytes));
      }
      return r;
    }
    case static_cast<uint8_t>(StoreOp::kGet): {
      r.op = StoreOp::kGet;
      uint16_t n = 0;
      if (!in.U32(&r.wait_ms) || !in.U16(&n) || !in.Bytes(n, &r.key)) {
        return absl::InvalidArgumentError("group store: a Get frame is truncated");
      }
      if (absl::Status s = CheckKey(r.key); !s.ok()) return s;
      if (r.wait_ms > StoreFrameLimits::kMaxWaitMs) {
        return absl::InvalidArgumentError(StrCat("group store: a Get waits ", r.wait_ms,
                                                 " ms; the limit is ",
                                                 StoreFrameLimits::kMaxWaitMs));
      }
      if (!in.rest().empty()) {
        return absl::InvalidArgumentError(
            StrCat("group store: a Get frame has ", in.rest().size(), " bytes after its key"));
      }
      return r;
    }
    default:
      return absl::InvalidArgumentError(StrCat("group store: unknown request op ",
                                               static_cast<int>(op),
                                               "; it must be 1 (hello), 2 (set) or 3 (get)"));
  }
}

std::string EncodeStoreResponse(const StoreResponse& r) {
  std::string out;
  out.push_back(static_cast<char>(static_cast<uint8_t>(r.code)));
  out += r.payload;
  return out;
}

absl::StatusOr<StoreResponse> DecodeStoreResponse(std::string_view body) {
  if (body.empty()) return absl::InvalidArgumentError("group store: an empty response frame");
  if (body.size() > StoreFrameLimits::kMaxFrameBytes) {
    return absl::InvalidArgumentError(StrCat("group store: a response frame is ", body.size(),
                                             " bytes; the limit is ",
                                             StoreFrameLimits::kMaxFrameBytes));
  }
  const uint8_t code = static_cast<uint8_t>(body[0]);
  if (code > static_cast<uint8_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::InvalidArgumentError(
        StrCat("group store: a response has status code ", static_cast<int>(code)));
  }
  StoreResponse r;
  r.code = static_cast<absl::StatusCode>(code);
  r.payload.assign(body.substr(1));
  return r;
}

}  // namespace baton::parallel
