// A read-only memory map of a whole file. Model and vocabulary files are used in place.
//
//   BATON_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open("model.gguf"));
//   std::string_view bytes = file.view();
//
// A file of 4 MiB or more is mapped at a 2 MiB boundary and advised MADV_HUGEPAGE, so
// that where the kernel keeps large folios in the page cache (Linux 6.x: ext4, xfs, btrfs,
// tmpfs) a streaming reader of the weights walks 2 MiB pages. A file already cached in
// small folios (just written, or read with read()) is dropped from the cache first when
// the kernel can do better; see PreferHugePages in the .cc.
//
// MappedFile::Open(path, MappedFile::Backing::kAnonymousCopy) instead reads the file
// once into anonymous memory advised for transparent huge pages (llama.cpp's
// --no-mmap): the bytes no longer share the page cache, and a streaming reader walks
// 2 MiB pages instead of 4 KiB ones.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace baton {

class MappedFile {
 public:
  enum class Backing { kFileMap, kAnonymousCopy };
  static absl::StatusOr<MappedFile> Open(const std::string& path,
                                         Backing backing = Backing::kFileMap);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::string_view view() const { return {static_cast<const char*>(data_), size_}; }
  size_t size() const { return size_; }
  // Bytes now mapped with 2 MiB page-table entries (from /proc/self/smaps; 0 where the
  // kernel does not say). For reports and tests; it reads a /proc file.
  size_t HugePageBytes() const;
  // After a pass over the bytes: if a sizeable part of a file map still sits on small
  // pages although the kernel mapped this file with 2 MiB pages at Open (parts of the file
  // were cached in small folios, or split since), drops the whole file from the page
  // cache, so that the next pass reads it back in 2 MiB folios. Returns whether it did.
  // Only the first call checks; the file's descriptor is closed after it.
  bool RecacheSmallPages();

 private:
  void* data_ = nullptr;  // start of the bytes
  size_t size_ = 0;
  void* map_ = nullptr;  // what munmap releases (differs from data_ for an aligned copy)
  size_t map_size_ = 0;
  int fd_ = -1;  // open while RecacheSmallPages may still drop the file's cache
};

// Maps the pages of [p, p + n) into this process. MADV_POPULATE_READ (Linux 5.14) does it
// in one call, several times faster than faulting page by page; older kernels refuse it,
// and then each page is read once.
void PopulatePages(const void* p, size_t n);

// Reads a whole file into a string; for small text files (configs, templates).
absl::StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes);

}  // namespace baton
