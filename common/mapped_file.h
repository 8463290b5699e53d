// A read-only memory map of a whole file. Model and vocabulary files are used in place.
//
//   BATON_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open("model.gguf"));
//   std::string_view bytes = file.view();
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace baton {

class MappedFile {
 public:
  static absl::StatusOr<MappedFile> Open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::string_view view() const { return {static_cast<const char*>(data_), size_}; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Reads a whole file into a string; for small text files (configs, templates).
absl::StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes);

}  // namespace baton
