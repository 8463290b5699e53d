#include "common/install_paths.h"

#include <filesystem>
#include <system_error>

// Set for this file alone by common/CMakeLists.txt.
#ifndef BATON_BUILD_BIN_DIR
#error "BATON_BUILD_BIN_DIR (the build tree's bin/) must be defined"
#endif
#ifndef BATON_SOURCE_MODEL_DIR
#error "BATON_SOURCE_MODEL_DIR (the source tree's models/baton-tiny) must be defined"
#endif

namespace baton {

std::string DefaultModelPathFor(const std::string& bin_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // equivalent() sees through symlinks and spellings (build/release/bin/ vs /abs/...); it
  // fails, and so says no, when either directory is gone (a build tree removed after
  // installing).
  if (fs::equivalent(fs::path(bin_dir), fs::path(BATON_BUILD_BIN_DIR), ec) && !ec) {
    return BATON_SOURCE_MODEL_DIR;
  }
  return (fs::path(bin_dir) / ".." / "share" / "baton" / "models" / "baton-tiny")
      .lexically_normal()
      .string();
}

std::string DefaultModelPath() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  // Without /proc the binary's place is unknown; the build tree's answer is the one left.
  if (ec) return BATON_SOURCE_MODEL_DIR;
  return DefaultModelPathFor(self.parent_path().string());
}

}  // namespace baton
