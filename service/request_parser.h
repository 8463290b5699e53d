// The Beast parser settings, limits and conversions that the server and ParseHttpRequest
// share, so that the fuzz target exercises exactly what the server runs. Internal.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "boost/beast/http/message.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/string_body.hpp"
#include "service/http_options.h"
#include "service/http_request.h"

namespace baton::service {
namespace http_internal {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// The parser settings the server uses: header and body limits.
void ConfigureParser(RequestParser& parser, const HttpServerOptions& limits);
// Beast applies its header limit to the request line and to the fields separately, so a
// header of up to twice the limit gets through it. Checked again once the header is parsed.
bool HeaderTooLarge(size_t header_bytes, const HttpServerOptions& limits);
// Chunked trailers are merged into the fields after the body, past both checks above; the
// request's method, target and every field together must also fit the header limit.
bool FieldsTooLarge(const HttpRequest& request, const HttpServerOptions& limits);
// RFC 9112 6.1 and 6.3: a request's Transfer-Encoding must be exactly "chunked", the only
// coding the server decodes. Beast reads any other value as "no body", and the body would
// then be parsed as the next request on the connection (request smuggling). Unimplemented
// (501) for a list that ends in chunked but adds another coding ("gzip, chunked");
// InvalidArgument (400) for one that does not end in chunked ("xchunked", "identity").
// Either way the server answers and closes the connection.
absl::Status CheckTransferEncoding(
    const boost::beast::http::request_header<boost::beast::http::fields>& header);
HttpRequest ToHttpRequest(boost::beast::http::request<boost::beast::http::string_body>&& message);
// The Status for a Beast parse error (header_limit, body_limit or anything else).
absl::Status ParseErrorStatus(const boost::system::error_code& ec, const HttpServerOptions& limits);

}  // namespace http_internal
}  // namespace baton::service
