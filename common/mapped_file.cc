#include "common/mapped_file.h"
#include "common/strings.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

namespace baton {

namespace {

// Huge-page size on x86-64 and arm64 with 4 KiB base pages; the copy is aligned to it so
// that the kernel can back every full 2 MiB stretch with one huge page.
constexpr size_t kHugePage = size_t{2} << 20;

// Reads all of fd into [dst, dst + size).
absl::Status ReadAll(int fd, char* dst, size_t size, const std::string& path) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, dst + done, std::min<size_t>(size - done, size_t{1} << 30),
                              static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::DataLossError(baton::StrCat("reading '", path, "' stopped at byte ", done,
                                               " of ", size, ": ",
                                               n == 0 ? "end of file" : std::strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MappedFile> MappedFile::Open(const std::string& path, Backing backing) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(baton::StrCat("cannot open '", path, "': ", std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(baton::StrCat("'", path, "' is not a regular file"));
  }
  MappedFile file;
  file.size_ = static_cast<size_t>(st.st_size);
  if (file.size_ == 0) {
    ::close(fd);
    return file;
  }
  if (backing == Backing::kFileMap) {
    void* p = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) {
      return absl::InternalError(
          baton::StrCat("mmap of '", path, "' failed: ", std::strerror(errno)));
    }
    file.data_ = file.map_ = p;
    file.map_size_ = file.size_;
    return file;
  }
  // Over-allocate by one huge page and start the bytes at the first 2 MiB boundary.
  file.map_size_ = file.size_ + kHugePage;
  void* p =
      ::mmap(nullptr, file.map_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    ::close(fd);
    return absl::ResourceExhaustedError(
        baton::StrCat("cannot allocate ", file.size_, " bytes to load '", path,
                      "' into memory: ", std::strerror(errno), "; use the memory map instead"));
  }
  file.map_ = p;
  const auto base = reinterpret_cast<uintptr_t>(p);
  file.data_ = reinterpret_cast<void*>((base + kHugePage - 1) & ~(kHugePage - 1));
#ifdef MADV_HUGEPAGE
  // Advice only: where THP is off the copy still works, on 4 KiB pages.
  (void)::madvise(file.data_, file.size_, MADV_HUGEPAGE);
#endif
  absl::Status read = ReadAll(fd, static_cast<char*>(file.data_), file.size_, path);
  ::close(fd);
  if (!read.ok()) return read;  // file's destructor unmaps
  (void)::mprotect(p, file.map_size_, PROT_READ);
  return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      map_(std::exchange(other.map_, nullptr)),
      map_size_(std::exchange(other.map_size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (map_ != nullptr) ::munmap(map_, map_size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    map_ = std::exchange(other.map_, nullptr);
    map_size_ = std::exchange(other.map_size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(baton::StrCat("cannot open '", path, "'"));
  in.seekg(0, std::ios::end);
  const auto size = static_cast<size_t>(in.tellg());
  if (size > max_bytes) {
    return absl::InvalidArgumentError(baton::StrCat(
        "'", path, "' is ", size, " bytes; the limit for this file is ", max_bytes, " bytes"));
  }
  in.seekg(0);
  std::string data(size, '\0');
  in.read(data.data(), static_cast<std::streamsize>(size));
  if (!in) return absl::DataLossError(baton::StrCat("short read of '", path, "'"));
  return data;
}

}  // namespace baton
