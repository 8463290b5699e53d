#include "service/api_key.h"

#include "gtest/gtest.h"

namespace baton::service {
namespace {

TEST(BearerTokenMatchesTest, AcceptsTheKeyWithAnyCaseOfScheme) {
  EXPECT_TRUE(BearerTokenMatches("Bearer sk-123", "sk-123"));
  EXPECT_TRUE(BearerTokenMatches("bearer sk-123", "sk-123"));
  EXPECT_TRUE(BearerTokenMatches("BEARER sk-123", "sk-123"));
  EXPECT_TRUE(BearerTokenMatches("  Bearer   sk-123  ", "sk-123"));
  EXPECT_TRUE(BearerTokenMatches("Bearer\tsk-123", "sk-123"));
}

TEST(BearerTokenMatchesTest, RejectsEverythingElse) {
  EXPECT_FALSE(BearerTokenMatches("Bearer sk-124", "sk-123"));
  EXPECT_FALSE(BearerTokenMatches("Bearer sk-12", "sk-123"));
  EXPECT_FALSE(BearerTokenMatches("Bearer sk-1234", "sk-123"));
  EXPECT_FALSE(BearerTokenMatches("Bearer SK-123", "sk-123"));  // the key is case-sensitive
  EXPECT_FALSE(BearerTokenMatches("sk-123", "sk-123"));
  EXPECT_FALSE(BearerTokenMatches("Basic sk-123", "sk-123"));
  EXPECT_FALSE(BearerTokenMatches("Bearersk-123", "sk-123"));
  EXPECT_FALSE(BearerTokenMatches("Bearer ", "sk-123"));
  EXPECT_FALSE(BearerTokenMatches("", "sk-123"));
  EXPECT_FALSE(BearerTokenMatches("Bearer sk-123 extra", "sk-123"));
}

TEST(BearerTokenMatchesTest, AnEmptyKeyMatchesNothing) {
  EXPECT_FALSE(BearerTokenMatches("Bearer ", ""));
  EXPECT_FALSE(BearerTokenMatches("Bearer x", ""));
  EXPECT_FALSE(BearerTokenMatches("", ""));
}

}  // namespace
}  // namespace baton::service
