// The request waiter hands a connection to a thread once HasRequestHead says its head is
// whole; every request the parser accepts must pass it, or the connection would wait for
// its read timeout with a request in hand.
#include <string>

#include "gtest/gtest.h"
#include "service/http_connection.h"
#include "service/http_request.h"

namespace baton::service {
namespace {

using http_internal::HasRequestHead;

TEST(HasRequestHeadTest, FindsTheBlankLineThatEndsAHead) {
  EXPECT_TRUE(HasRequestHead("GET / HTTP/1.1\r\nHost: a\r\n\r\n"));
  EXPECT_TRUE(HasRequestHead("GET / HTTP/1.1\r\n\r\n"));
  EXPECT_TRUE(HasRequestHead("POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nab"));
  EXPECT_TRUE(HasRequestHead("\r\n\r\nGET / HTTP/1.1\r\n\r\n"));  // empty lines before it
  EXPECT_FALSE(HasRequestHead(""));
  EXPECT_FALSE(HasRequestHead("GET / HTTP/1.1\r\nHost: a\r\n"));
  EXPECT_FALSE(HasRequestHead("GET / HTTP/1.1\r\nHost: a\r\n\r"));
  EXPECT_FALSE(HasRequestHead("\r\n\r\n"));
}

TEST(HasRequestHeadTest, EveryRequestTheParserAcceptsHasOne) {
  const HttpServerOptions options;
  for (const std::string bytes :
       {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", "GET / HTTP/1.1\nHost: a\n\n",
        "GET / HTTP/1.0\r\n\r\n", "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\n\r\n", "POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nab"}) {
    if (ParseHttpRequest(bytes, options).ok()) {
      EXPECT_TRUE(HasRequestHead(bytes)) << "parsed but not seen whole: " << bytes;
    }
  }
}

}  // namespace
}  // namespace baton::service
