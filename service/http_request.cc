#include "service/http_request.h"

#include <exception>

#include "boost/asio/buffer.hpp"
#include "boost/beast/http/error.hpp"
#include "common/strings.h"
#include "service/request_parser.h"

namespace baton::service {

namespace http = boost::beast::http;

std::string_view HttpRequest::Header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name) return value;
  }
  return {};
}

absl::StatusOr<HttpRequest> ParseHttpRequest(std::string_view bytes,
                                             const HttpServerOptions& limits) {
  try {
    http_internal::RequestParser parser;
    http_internal::ConfigureParser(parser, limits);
    // Stop after the header, as the server's read_header does, to learn its size.
    parser.eager(false);
    size_t offset = 0;
    while (!parser.is_done()) {
      boost::system::error_code ec;
      size_t used =
          parser.put(boost::asio::const_buffer(bytes.data() + offset, bytes.size() - offset), ec);
      offset += used;
      if (ec == http::error::need_more) {
        // need_more with nothing consumed means the parser waits for bytes we do not have.
        if (used == 0 || offset >= bytes.size()) {
          return absl::InvalidArgumentError(
              StrCat("malformed HTTP request: incomplete after ", bytes.size(), " bytes"));
        }
        continue;
      }
      if (ec) return http_internal::ParseErrorStatus(ec, limits);
      if (parser.is_header_done() && !parser.eager()) {
        if (http_internal::HeaderTooLarge(offset, limits)) {
          return http_internal::ParseErrorStatus(http::error::header_limit, limits);
        }
        if (absl::Status te = http_internal::CheckTransferEncoding(parser.get()); !te.ok()) {
          return te;
        }
        parser.eager(true);
        continue;
      }
      if (used == 0) {
        return absl::InvalidArgumentError(
            StrCat("malformed HTTP request: incomplete after ", bytes.size(), " bytes"));
      }
    }
    HttpRequest request = http_internal::ToHttpRequest(parser.release());
    if (http_internal::FieldsTooLarge(request, limits)) {
      return http_internal::ParseErrorStatus(http::error::header_limit, limits);
    }
    return request;
  } catch (const std::exception& e) {
    // Beast reports parse errors through error codes; this is allocation failure and the like.
    return absl::InternalError(StrCat("parsing HTTP request: ", e.what()));
  }
}

}  // namespace baton::service
