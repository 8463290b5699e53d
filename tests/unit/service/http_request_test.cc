#include "service/http_request.h"

#include <string>
#include <vector>

#include "common/strings.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::service {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(ParseHttpRequestTest, ParsesAGet) {
  auto r = ParseHttpRequest(
      "GET /v1/models?limit=2 HTTP/1.1\r\nHost: x\r\nX-Request-ID: abc\r\n"
      "Authorization: Bearer k\r\n\r\n",
      {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->method, "GET");
  EXPECT_EQ(r->target, "/v1/models?limit=2");
  EXPECT_EQ(r->path, "/v1/models");
  EXPECT_EQ(r->version, 11);
  EXPECT_THAT(r->headers, ElementsAre(Pair("host", "x"), Pair("x-request-id", "abc"),
                                      Pair("authorization", "Bearer k")));
  EXPECT_EQ(r->Header("x-request-id"), "abc");
  EXPECT_EQ(r->Header("absent"), "");
  EXPECT_EQ(r->body, "");
}

TEST(ParseHttpRequestTest, ParsesBodiesByLengthAndChunked) {
  auto r = ParseHttpRequest("POST /v1/completions HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->method, "POST");
  EXPECT_EQ(r->body, "hello");

  r = ParseHttpRequest(
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "abcde");

  // Bytes after the request (the next pipelined one) are not part of it.
  r = ParseHttpRequest("GET /a HTTP/1.0\r\n\r\nGET /b HTTP/1.1\r\n\r\n", {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, "/a");
  EXPECT_EQ(r->version, 10);
}

// RFC 9112 6.1/6.3: a coding other than chunked would make the body read as "none" and
// parsed as the next request; it is refused, and named.
TEST(ParseHttpRequestTest, RefusesTransferCodingsOtherThanChunked) {
  const std::string smuggled = "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n";
  struct Case {
    std::string fields;
    absl::StatusCode code;
    std::string named;  // how the message names the coding
  };
  for (const Case& c : {
           Case{"Transfer-Encoding: xchunked", absl::StatusCode::kInvalidArgument,
                "Transfer-Encoding 'xchunked'"},
           Case{"Transfer-Encoding: identity", absl::StatusCode::kInvalidArgument,
                "Transfer-Encoding 'identity'"},
           // Beast itself refuses a field after the one that ends in chunked.
           Case{"Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip",
                absl::StatusCode::kInvalidArgument, "bad Transfer-Encoding"},
           Case{"Transfer-Encoding: gzip, Chunked", absl::StatusCode::kUnimplemented,
                "Transfer-Encoding 'gzip, chunked'"},
           Case{"Transfer-Encoding: ,", absl::StatusCode::kInvalidArgument, "Transfer-Encoding ''"},
       }) {
    auto r = ParseHttpRequest(
        StrCat("POST / HTTP/1.1\r\nHost: a\r\n", c.fields, "\r\n\r\n", smuggled), {});
    EXPECT_EQ(r.status().code(), c.code) << c.fields;
    EXPECT_THAT(r.status().message(), HasSubstr(c.named)) << c.fields;
  }
  // The one coding the server decodes, in any case.
  auto ok = ParseHttpRequest("POST / HTTP/1.1\r\nTransfer-Encoding: CHUNKED\r\n\r\n0\r\n\r\n", {});
  EXPECT_TRUE(ok.ok()) << ok.status();
}

TEST(ParseHttpRequestTest, RejectsMalformedAndIncompleteInput) {
  for (std::string bad :
       {"", "GET", "GET / HTTP/1.1\r\n", "GET / HTTP/1.1\r\nHost: x\r\n",
        "BAD REQUEST LINE\r\n\r\n", "GET / HTTP/9.9\r\n\r\n", "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nshort",
        "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"}) {
    auto r = ParseHttpRequest(bad, {});
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("malformed HTTP request")) << bad;
  }
}

TEST(ParseHttpRequestTest, NamesTheLimitWhenTheBodyIsTooLarge) {
  HttpServerOptions limits;
  limits.max_body_bytes = 8;
  auto r = ParseHttpRequest("POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\n123456789", limits);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("limit of 8 bytes"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("--max-body-bytes"));

  r = ParseHttpRequest(
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n12345\r\n5\r\n67890\r\n0\r\n\r\n",
      limits);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);

  EXPECT_TRUE(
      ParseHttpRequest("POST / HTTP/1.1\r\nContent-Length: 8\r\n\r\n12345678", limits).ok());
}

TEST(ParseHttpRequestTest, NamesTheLimitWhenTheHeaderIsTooLarge) {
  HttpServerOptions limits;
  limits.max_header_bytes = 128;
  auto r = ParseHttpRequest(StrCat("GET / HTTP/1.1\r\nX-Big: ", std::string(200, 'a'), "\r\n\r\n"),
                            limits);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("headers are larger than the limit of 128"));

  // Beast limits the request line and the fields separately; the whole header counts here.
  r = ParseHttpRequest(StrCat("GET /", std::string(100, 't'),
                              " HTTP/1.1\r\nX-A: ", std::string(100, 'a'), "\r\n\r\n"),
                       limits);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);

  // A short header followed by a long body is within the header limit.
  limits.max_body_bytes = 1000;
  EXPECT_TRUE(
      ParseHttpRequest(
          StrCat("POST / HTTP/1.1\r\nContent-Length: 500\r\n\r\n", std::string(500, 'b')), limits)
          .ok());
}

}  // namespace
}  // namespace baton::service
