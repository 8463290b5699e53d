#include "common/install_paths.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace baton {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the test's temporary directory, removed at the end.
class InstallPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("install_paths_test." + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "prefix" / "bin");
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

// This test binary runs from the build tree's bin/, as `build/release/bin/baton` does.
TEST_F(InstallPathsTest, TheBuildTreeServesTheSourceTreesModel) {
  const std::string want = std::string(BATON_SOURCE_DIR) + "/models/baton-tiny";
  EXPECT_EQ(DefaultModelPath(), want);
  EXPECT_TRUE(fs::exists(fs::path(DefaultModelPath()) / "config.json"));
  // The same directory by another name (a symlink to it) is still the build tree.
  const fs::path bin = fs::read_symlink("/proc/self/exe").parent_path();
  fs::create_directory_symlink(bin, root_ / "linked-bin");
  EXPECT_EQ(DefaultModelPathFor((root_ / "linked-bin").string()), want);
}

TEST_F(InstallPathsTest, AnInstalledBinaryFindsTheModelUnderItsOwnPrefix) {
  const fs::path want = root_ / "prefix" / "share" / "baton" / "models" / "baton-tiny";
  EXPECT_EQ(DefaultModelPathFor((root_ / "prefix" / "bin").string()), want.string());
  EXPECT_EQ(DefaultModelPathFor((root_ / "prefix" / "bin").string() + "/"), want.string());
  // Moved: the answer follows the tree, and never falls back to the source tree, even
  // where the installed model is missing (the error then names the installed path).
  fs::rename(root_ / "prefix", root_ / "moved");
  EXPECT_EQ(DefaultModelPathFor((root_ / "moved" / "bin").string()),
            (root_ / "moved" / "share" / "baton" / "models" / "baton-tiny").string());
}

}  // namespace
}  // namespace baton
