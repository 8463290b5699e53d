#include "service/request_parser.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "boost/beast/http/error.hpp"
#include "boost/beast/http/rfc7230.hpp"
#include "common/strings.h"

namespace baton::service {

namespace http = boost::beast::http;

namespace http_internal {

void ConfigureParser(RequestParser& parser, const HttpServerOptions& limits) {
  // Beast counts the header limit in a uint32_t.
  parser.header_limit(static_cast<std::uint32_t>(
      std::min<size_t>(limits.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
  parser.body_limit(static_cast<std::uint64_t>(limits.max_body_bytes));
  // Parse the body as soon as the header is done, so that one put() can take a whole request.
  parser.eager(true);
}

bool HeaderTooLarge(size_t header_bytes, const HttpServerOptions& limits) {
  return header_bytes > limits.max_header_bytes;
}

bool FieldsTooLarge(const HttpRequest& request, const HttpServerOptions& limits) {
  size_t bytes = request.method.size() + request.target.size();
  for (const auto& [name, value] : request.headers) bytes += name.size() + value.size();
  return bytes > limits.max_header_bytes;
}

absl::Status CheckTransferEncoding(const http::request_header<http::fields>& header) {
  if (header.count(http::field::transfer_encoding) == 0) return absl::OkStatus();
  // Every Transfer-Encoding field, in order, forms one list of codings.
  std::vector<std::string> codings;
  std::string list;
  for (auto it = header.find(http::field::transfer_encoding);
       it != header.end() && it->name() == http::field::transfer_encoding; ++it) {
    for (auto coding : http::token_list(it->value())) {
      std::string lower(coding.data(), coding.size());
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      list.append(list.empty() ? "" : ", ").append(lower);
      codings.push_back(std::move(lower));
    }
  }
  constexpr size_t kShown = 64;  // the field may be as long as the header limit
  if (list.size() > kShown) list = StrCat(list.substr(0, kShown), "...");
  if (codings.empty() || codings.back() != "chunked") {
    return absl::InvalidArgumentError(
        StrCat("Transfer-Encoding '", list,
               "' does not end in 'chunked'; send the body with Content-Length or with "
               "Transfer-Encoding: chunked"));
  }
  if (codings.size() > 1) {
    return absl::UnimplementedError(
        StrCat("Transfer-Encoding '", list,
               "' is not supported; this server decodes only 'chunked': send the body with "
               "Transfer-Encoding: chunked alone"));
  }
  return absl::OkStatus();
}

HttpRequest ToHttpRequest(http::request<http::string_body>&& message) {
  HttpRequest out;
  auto method = message.method_string();
  out.method.assign(method.data(), method.size());
  auto target = message.target();
  out.target.assign(target.data(), target.size());
  out.path = out.target.substr(0, out.target.find('?'));
  out.version = static_cast<int>(message.version());
  for (const auto& field : message) {
    auto name = field.name_string();
    auto value = field.value();
    std::string lower(name.data(), name.size());
    std::transform(lower.begin(), lower.end(), lower.begin(), [](char c) {
      return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    });
    out.headers.emplace_back(std::move(lower), std::string(value.data(), value.size()));
  }
  out.body = std::move(message.body());
  return out;
}

absl::Status ParseErrorStatus(const boost::system::error_code& ec,
                              const HttpServerOptions& limits) {
  if (ec == http::error::header_limit) {
    return absl::ResourceExhaustedError(StrCat("request headers are larger than the limit of ",
                                               limits.max_header_bytes,
                                               " bytes; send fewer or shorter headers"));
  }
  if (ec == http::error::body_limit) {
    return absl::ResourceExhaustedError(
        StrCat("request body is larger than the limit of ", limits.max_body_bytes,
               " bytes; send a smaller body or raise the limit with --max-body-bytes"));
  }
  return absl::InvalidArgumentError(StrCat("malformed HTTP request: ", ec.message()));
}

}  // namespace http_internal

}  // namespace baton::service
