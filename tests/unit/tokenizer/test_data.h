// Where the shared test data lives, and the visible skip when it is absent.
#pragma once

#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace baton::tokenizer::testing {

inline std::string TestDataPath(const std::string& relative) {
  return std::string(BATON_TESTDATA_DIR) + "/" + relative;
}

#define BATON_REQUIRE_TESTDATA(relative)                                                         \
  do {                                                                                           \
    if (!std::filesystem::exists(::baton::tokenizer::testing::TestDataPath(relative))) {         \
      GTEST_SKIP() << "testdata absent: " << ::baton::tokenizer::testing::TestDataPath(relative) \
                   << " (run with ../shared/testdata beside the checkout)";                      \
    }                                                                                            \
  } while (false)

}  // namespace baton::tokenizer::testing
