// What was built: the CMake project version and the git commit at configure time
// ("unknown" outside a git checkout). Defined in a file CMake generates
// (service/build_info.cc.in), so that a new commit recompiles that one file.
#pragma once

#include <string_view>

namespace baton::service {

std::string_view BuildVersion();
std::string_view BuildCommit();

}  // namespace baton::service
