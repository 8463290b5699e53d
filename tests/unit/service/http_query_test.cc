#include "service/http_query.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::service {
namespace {

using ::testing::HasSubstr;
using ::testing::Pair;

TEST(HttpQueryTest, SplitsAndDecodesAsAFormDoes) {
  EXPECT_EQ(QueryOf("/inspect/plan?device=h200&tp=2"), "device=h200&tp=2");
  EXPECT_EQ(QueryOf("/inspect/plan"), "");
  EXPECT_EQ(QueryOf("/a?b?c"), "b?c");
  auto p = ParseQuery("device=h200&&tp=2&flag&n%61me=a+b%2Bc%25&=x", 8);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(*p, ::testing::ElementsAre(Pair("device", "h200"), Pair("tp", "2"), Pair("flag", ""),
                                         Pair("name", "a b+c%"), Pair("", "x")));
  EXPECT_TRUE(ParseQuery("", 0)->empty());
}

TEST(HttpQueryTest, RefusalsSayWhatIsWrong) {
  EXPECT_THAT(ParseQuery("a=%4", 8).status().message(), HasSubstr("'%25'"));
  EXPECT_THAT(ParseQuery("a=%zz", 8).status().message(), HasSubstr("two hex digits"));
  EXPECT_THAT(ParseQuery("tp=1&tp=2", 8).status().message(), HasSubstr("'tp' is given twice"));
  EXPECT_THAT(ParseQuery("a&b&c", 2).status().message(), HasSubstr("more than 2 parameters"));
  EXPECT_TRUE(ParseQuery("a&b", 2).ok());
}

}  // namespace
}  // namespace baton::service
