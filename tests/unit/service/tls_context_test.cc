// The public ports' TLS files: what is wrong with them is named by its flag. (A working
// certificate is served in e2e.public_tls, which makes one with the openssl command.)
#include "service/tls_context.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::service {
namespace {

using ::testing::HasSubstr;

TEST(TlsContextTest, BothFilesOrNeither) {
  EXPECT_FALSE(PublicTlsFiles{}.enabled());
  for (const PublicTlsFiles& half : {PublicTlsFiles{"cert.pem", ""}, PublicTlsFiles{"", "k.pem"}}) {
    EXPECT_TRUE(half.enabled());
    auto ctx = ServerTlsContext(half, "--public-tls-");
    ASSERT_FALSE(ctx.ok());
    EXPECT_THAT(std::string(ctx.status().message()),
                HasSubstr("give both --public-tls-cert and --public-tls-key"));
    EXPECT_FALSE(ServerTlsCredentials(half, "--tls-").ok());
  }
}

TEST(TlsContextTest, FilesThatAreNotPemAreNamed) {
  const std::string junk = ::testing::TempDir() + "/junk.pem";
  std::ofstream(junk) << "not a certificate\n";
  auto ctx = ServerTlsContext({junk, junk}, "--public-tls-");
  ASSERT_FALSE(ctx.ok());
  EXPECT_THAT(std::string(ctx.status().message()), HasSubstr("--public-tls-cert " + junk));
  auto missing = ServerTlsContext({"/nonexistent/cert.pem", junk}, "--tls-");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("--tls-cert /nonexistent"));
}

}  // namespace
}  // namespace baton::service
