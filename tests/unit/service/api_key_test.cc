#include "service/api_key.h"

#include <climits>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
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

std::string KeyFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ApiKeysTest, WithoutKeysEveryoneIsTheAnonymousTenant) {
  auto keys = ApiKeys::Create("", "", "secret");
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_FALSE((*keys)->required());
  const Tenant* t = (*keys)->Find("");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->cache_namespace, "");
  EXPECT_EQ(t->min_priority, INT_MIN);
  EXPECT_EQ((*keys)->Find("Bearer anything"), t);
}

TEST(ApiKeysTest, EachKeyFindsItsTenantAndTenantsGetTheirOwnNamespaces) {
  const std::string file = KeyFile("keys", R"(# key       tenant   min priority
sk-alice-1  alice
sk-alice-2  alice    # a second key of the same tenant

sk-bob      bob      5
)");
  auto keys = ApiKeys::Create("sk-admin", file, "cluster-secret");
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_TRUE((*keys)->required());
  const Tenant* a1 = (*keys)->Find("Bearer sk-alice-1");
  const Tenant* a2 = (*keys)->Find("Bearer sk-alice-2");
  const Tenant* bob = (*keys)->Find("Bearer sk-bob");
  const Tenant* admin = (*keys)->Find("Bearer sk-admin");
  ASSERT_NE(a1, nullptr);
  ASSERT_NE(bob, nullptr);
  ASSERT_NE(admin, nullptr);
  EXPECT_EQ(a1, a2);
  EXPECT_EQ(a1->name, "alice");
  EXPECT_EQ(admin->name, "default");
  EXPECT_EQ(a1->min_priority, 0);
  EXPECT_EQ(bob->min_priority, 5);
  EXPECT_EQ(admin->min_priority, INT_MIN);  // --api-key: as before, no ceiling
  EXPECT_EQ((*keys)->Find("Bearer sk-carol"), nullptr);
  EXPECT_EQ((*keys)->Find(""), nullptr);
  // Namespaces: distinct per tenant, not the tenant's name, the same under the same secret
  // (two routers of one cluster), different under another.
  EXPECT_NE(a1->cache_namespace, bob->cache_namespace);
  EXPECT_EQ(a1->cache_namespace.find("alice"), std::string::npos);
  auto again = ApiKeys::Create("", file, "cluster-secret");
  auto other = ApiKeys::Create("", file, "another-secret");
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*again)->Find("Bearer sk-bob")->cache_namespace, bob->cache_namespace);
  EXPECT_NE((*other)->Find("Bearer sk-bob")->cache_namespace, bob->cache_namespace);
}

TEST(ApiKeysTest, ATenantBoundsPriorityAndNamespacesTheCacheSalt) {
  const Tenant anonymous;
  EXPECT_EQ(TenantPriority(anonymous, -7), -7);
  EXPECT_EQ(TenantCacheSalt(anonymous, "s"), "s");
  EXPECT_EQ(TenantCacheSalt(anonymous, ""), "");
  const Tenant t{"bob", "tenant:0123", 5};
  EXPECT_EQ(TenantPriority(t, -100), 5);  // cannot jump ahead of its ceiling
  EXPECT_EQ(TenantPriority(t, 5), 5);
  EXPECT_EQ(TenantPriority(t, 9), 9);  // may go behind
  EXPECT_EQ(TenantCacheSalt(t, ""), "tenant:0123");
  EXPECT_EQ(TenantCacheSalt(t, "s"), "tenant:0123/s");
  // A client cannot name another tenant's namespace with its own salt.
  EXPECT_NE(TenantCacheSalt(t, "tenant:4567"), "tenant:4567");
}

TEST(ApiKeysTest, AMalformedKeyFileIsRefusedNamingTheLine) {
  const struct {
    const char* text;
    const char* says;
  } cases[] = {
      {"sk-1\n", "line 1: expected 'KEY TENANT [MIN_PRIORITY]'"},
      {"sk-1 a 1 extra\n", "line 1: expected"},
      {"# nothing\nsk-1 bad/name\n", "line 2: the tenant name"},
      {"sk-1 a x\n", "line 1: MIN_PRIORITY 'x' is not an integer"},
      {"sk-1 a 99999999999\n", "line 1: MIN_PRIORITY '99999999999'"},
      {"sk-1 a\nsk-1 b\n", "line 2: the key is given twice"},
      {"sk-1 a 1\nsk-2 a 2\n", "line 2: tenant 'a' was given another MIN_PRIORITY"},
      {"# only comments\n\n", "holds no key"},
  };
  for (const auto& c : cases) {
    auto keys = ApiKeys::Create("", KeyFile("bad_keys", c.text), "s");
    ASSERT_FALSE(keys.ok()) << c.text;
    EXPECT_EQ(keys.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(keys.status().message()), ::testing::HasSubstr(c.says)) << c.text;
    EXPECT_THAT(std::string(keys.status().message()), ::testing::HasSubstr("--api-key-file"));
  }
  EXPECT_FALSE(ApiKeys::Create("", ::testing::TempDir() + "/no_such_file", "s").ok());
}

}  // namespace
}  // namespace baton::service
