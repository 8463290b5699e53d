// Fuzzes ParseHttpRequest, the parser the HTTP server runs on every byte a client sends.
// Small limits make the 413 and 431 paths reachable. A request accepted under the small
// limits must be accepted, identically, under large ones: limits may only turn requests away.
// And every request it accepts has a head the server's waiter recognizes as whole.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/strings.h"
#include "service/http_connection.h"
#include "service/http_request.h"

namespace {

void Require(bool cond) {
  if (!cond) std::abort();
}

bool IsLowerToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c >= 'A' && c <= 'Z') return false;
    if (static_cast<unsigned char>(c) <= ' ' || c == ':' || c == 0x7f) return false;
  }
  return true;
}

void CheckResult(const absl::StatusOr<baton::service::HttpRequest>& r,
                 const baton::service::HttpServerOptions& limits) {
  if (!r.ok()) {
    const absl::StatusCode code = r.status().code();
    // Unimplemented: a transfer coding other than chunked before the final chunked (501).
    Require(code == absl::StatusCode::kInvalidArgument ||
            code == absl::StatusCode::kResourceExhausted ||
            code == absl::StatusCode::kUnimplemented);
    if (code == absl::StatusCode::kResourceExhausted) {
      // The message names the limit that was hit.
      const std::string message(r.status().message());
      Require(message.find(baton::StrCat(limits.max_body_bytes)) != std::string::npos ||
              message.find(baton::StrCat(limits.max_header_bytes)) != std::string::npos);
    }
    return;
  }
  Require(r->body.size() <= limits.max_body_bytes);
  Require(!r->method.empty() && !r->target.empty());
  Require(r->version == 10 || r->version == 11);
  Require(r->path == r->target.substr(0, r->target.find('?')));
  Require(r->remote.empty());
  size_t header_bytes = 0;
  for (const auto& [name, value] : r->headers) {
    Require(IsLowerToken(name));
    Require(value.find_first_of(std::string_view("\r\n\0", 3)) == std::string::npos);
    Require(r->Header(name).data() != nullptr);
    header_bytes += name.size() + value.size();
  }
  Require(header_bytes + r->method.size() + r->target.size() <= limits.max_header_bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  baton::service::HttpServerOptions small;
  small.max_body_bytes = 64;
  small.max_header_bytes = 256;
  baton::service::HttpServerOptions large;
  large.max_body_bytes = 1 << 20;
  large.max_header_bytes = 1 << 20;

  auto a = baton::service::ParseHttpRequest(bytes, small);
  CheckResult(a, small);
  auto b = baton::service::ParseHttpRequest(bytes, large);
  CheckResult(b, large);
  if (a.ok()) {
    Require(b.ok());
    Require(a->method == b->method && a->target == b->target && a->body == b->body);
    Require(a->headers == b->headers);
  }
  if (b.ok()) {
    // The server's waiter hands a connection to a thread once it sees a whole head: a
    // request the parser accepts must have one, or it would wait for ever.
    Require(baton::service::http_internal::HasRequestHead(bytes));
  }
  if (!b.ok() && b.status().code() == absl::StatusCode::kInvalidArgument) {
    // Malformed stays malformed whatever the limits (unless a limit is hit first).
    Require(!a.ok());
  }
  return 0;
}
