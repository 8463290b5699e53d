#include "modelgen/byte_sink.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/strings.h"

namespace baton::modelgen {

absl::Status FileSink::Open(const std::string& path, FileSink* sink) {
  sink->path_ = path;
  sink->file_ = std::fopen((path + ".partial").c_str(), "wb");
  if (sink->file_ == nullptr) {
    return absl::PermissionDeniedError(
        baton::StrCat("cannot create '", path, ".partial': ", std::strerror(errno)));
  }
  // A larger buffer than stdio's default: fewer syscalls for multi-GB writes.
  std::setvbuf(sink->file_, nullptr, _IOFBF, size_t{1} << 20);
  return absl::OkStatus();
}

FileSink::~FileSink() {
  if (file_ != nullptr) {
    std::fclose(file_);
    std::error_code ec;
    std::filesystem::remove(path_ + ".partial", ec);  // abandoned: leave nothing behind
  }
}

void FileSink::Write(std::string_view bytes) {
  if (failed_ || bytes.empty()) return;
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) failed_ = true;
  written_ += bytes.size();
}

absl::Status FileSink::Close() {
  const bool flush_failed = std::fflush(file_) != 0;
  const bool close_failed = std::fclose(file_) != 0;
  file_ = nullptr;
  std::error_code ec;
  if (failed_ || flush_failed || close_failed) {
    std::filesystem::remove(path_ + ".partial", ec);
    return absl::DataLossError(
        baton::StrCat("writing '", path_, "' failed (disk full?): ", std::strerror(errno)));
  }
  std::filesystem::rename(path_ + ".partial", path_, ec);
  if (ec) {
    return absl::DataLossError(
        baton::StrCat("cannot rename '", path_, ".partial': ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace baton::modelgen
