#include "parallel/store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"

namespace baton::parallel {

std::string FileStore::PathOf(const std::string& key) const {
  // Keys are ours ("tp0/rank1"); '/' would name a subdirectory.
  std::string name = key;
  for (char& c : name) {
    if (c == '/') c = '.';
  }
  return absl::StrCat(dir_, "/", name);
}

absl::Status FileStore::Set(const std::string& key, std::string_view value) {
  const std::string path = PathOf(key);
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(value.data(), static_cast<std::streamsize>(value.size()));
    if (!out) {
      return absl::UnavailableError(
          absl::StrCat("group store: cannot write ", tmp, ": ", std::strerror(errno)));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(
        absl::StrCat("group store: cannot rename ", tmp, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FileStore::Get(const std::string& key,
                                           std::chrono::milliseconds timeout) {
  const std::string path = PathOf(key);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::microseconds(100);
  while (true) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream buf;
      buf << in.rdbuf();
      return buf.str();
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("group store: no rank published '", key, "' in ", timeout.count(),
                       " ms (directory ", dir_, "); is every rank of the group running?"));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
}

}  // namespace baton::parallel
