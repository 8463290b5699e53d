#include "common/mapped_file.h"
#include "common/strings.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

namespace baton {

namespace {

// Huge-page size on x86-64 and arm64 with 4 KiB base pages; the copy is aligned to it so
// that the kernel can back every full 2 MiB stretch with one huge page.
constexpr size_t kHugePage = size_t{2} << 20;

// Bytes from p to the next 2 MiB boundary (0 when p is on one).
size_t PadToHugePage(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  return ((at + kHugePage - 1) & ~(kHugePage - 1)) - at;
}

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

// Maps fd read-only at an address aligned to kHugePage, advised MADV_HUGEPAGE. Where the
// kernel keeps large folios in the page cache (Linux 6.x on ext4, xfs, btrfs and tmpfs), a
// fault in such a mapping reads the file ahead in 2 MiB folios and maps each with one
// page-table entry, so a streaming reader of the weights walks 2 MiB pages, as it does on
// the anonymous copy, instead of missing the TLB every 4 KiB.
absl::Status MapAligned(int fd, size_t size, void** out) {
  const size_t reserve = size + kHugePage;
  void* r = ::mmap(nullptr, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) return absl::InternalError(std::strerror(errno));
  char* const base = static_cast<char*>(r);
  char* const aligned = base + PadToHugePage(base);
  void* p = ::mmap(aligned, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    ::munmap(r, reserve);
    return absl::InternalError(std::strerror(err));
  }
  // Give back the reservation on either side of the file's pages.
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  char* const file_end = aligned + ((size + page - 1) & ~(page - 1));
  char* const reserve_end = base + ((reserve + page - 1) & ~(page - 1));
  if (aligned > base) ::munmap(base, aligned - base);
  if (reserve_end > file_end) ::munmap(file_end, reserve_end - file_end);
#ifdef MADV_HUGEPAGE
  (void)::madvise(p, size, MADV_HUGEPAGE);  // advice only: without it, 4 KiB pages
#endif
  *out = p;
  return absl::OkStatus();
}

// Bytes of the mapping that starts at p that the kernel maps with 2 MiB entries
// (/proc/self/smaps: FilePmdMapped for a file map, AnonHugePages for anonymous memory);
// 0 where it cannot tell.
size_t PmdMappedBytes(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto want = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool in_vma = false;
  size_t bytes = 0;
  while (std::getline(smaps, line)) {
    unsigned long start = 0, end = 0;  // NOLINT(google-runtime-int): sscanf's %lx
    if (std::sscanf(line.c_str(), "%lx-%lx ", &start, &end) == 2) {
      if (in_vma) break;  // past the mapping
      in_vma = start == want;
      continue;
    }
    size_t kb = 0;
    if (in_vma && (std::sscanf(line.c_str(), "FilePmdMapped: %zu kB", &kb) == 1 ||
                   std::sscanf(line.c_str(), "AnonHugePages: %zu kB", &kb) == 1)) {
      bytes += kb << 10;
    }
  }
  return bytes;
}

// The page cache keeps a file at the folio sizes it was first cached with. A file just
// written, or read with read(), sits in small folios, and mapping it gives 4 KiB pages
// however it is advised, for as long as it stays cached. So: fault in the first 2 MiB; if
// they come as small pages, drop that stretch from the cache and fault it again. Only if it
// then comes as one 2 MiB page (the kernel and the file system can do it) is the rest of
// the file dropped too, to be read again, in 2 MiB folios, by the first pass over the
// weights. Pages that another process maps are never dropped (the kernel skips them), and
// then the first test fails and nothing more is dropped. Returns whether the first 2 MiB
// ended up on one 2 MiB page: whether this kernel can map this file so.
bool PreferHugePages(int fd, void* p, size_t size) {
  PopulatePages(p, kHugePage);
  if (PmdMappedBytes(p) > 0) return true;
  (void)::fdatasync(fd);                         // dirty pages cannot be dropped
  (void)::madvise(p, kHugePage, MADV_DONTNEED);  // our own mapping of them
  (void)::posix_fadvise(fd, 0, kHugePage, POSIX_FADV_DONTNEED);
  PopulatePages(p, kHugePage);
  if (PmdMappedBytes(p) == 0) return false;
  (void)::madvise(p, size, MADV_DONTNEED);
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  return true;
}

// Maps the file; *huge_capable tells whether PreferHugePages found 2 MiB pages possible.
absl::StatusOr<void*> MapFile(int fd, size_t size, const std::string& path, bool* huge_capable) {
  void* p = nullptr;
  absl::Status status;
  *huge_capable = false;
  if (size >= 2 * kHugePage) {
    status = MapAligned(fd, size, &p);
    if (status.ok()) *huge_capable = PreferHugePages(fd, p, size);
  } else {
    p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) status = absl::InternalError(std::strerror(errno));
  }
  if (!status.ok()) {
    return absl::InternalError(baton::StrCat("mmap of '", path, "' failed: ", status.message()));
  }
  return p;
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
    bool huge_capable = false;
    absl::StatusOr<void*> mapped = MapFile(fd, file.size_, path, &huge_capable);
    if (!mapped.ok()) {
      ::close(fd);
      return mapped.status();
    }
    file.data_ = file.map_ = *mapped;
    file.map_size_ = file.size_;
    if (huge_capable) {
      file.fd_ = fd;  // kept for RecacheSmallPages
    } else {
      ::close(fd);
    }
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
  file.data_ = static_cast<char*>(p) + PadToHugePage(p);
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

size_t MappedFile::HugePageBytes() const { return map_ == nullptr ? 0 : PmdMappedBytes(map_); }

bool MappedFile::RecacheSmallPages() {
  if (fd_ < 0) return false;
  const int fd = std::exchange(fd_, -1);  // one check per file
  // The tail past the last 2 MiB boundary cannot be one 2 MiB page; past that, a few
  // small folios are not worth a second read of the file.
  const bool drop = HugePageBytes() + size_ / 16 + kHugePage < size_;
  if (drop) {
    (void)::madvise(map_, map_size_, MADV_DONTNEED);
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  }
  ::close(fd);
  return drop;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      map_(std::exchange(other.map_, nullptr)),
      map_size_(std::exchange(other.map_size_, 0)),
      fd_(std::exchange(other.fd_, -1)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (map_ != nullptr) ::munmap(map_, map_size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    map_ = std::exchange(other.map_, nullptr);
    map_size_ = std::exchange(other.map_size_, 0);
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
  if (fd_ >= 0) ::close(fd_);
}

void PopulatePages(const void* p, size_t n) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const char* bytes = static_cast<const char*>(p);
#ifdef MADV_POPULATE_READ
  // madvise wants a page-aligned start: step back to the page holding p.
  const uintptr_t lead = reinterpret_cast<uintptr_t>(bytes) & (page - 1);
  if (::madvise(const_cast<char*>(bytes - lead), n + lead, MADV_POPULATE_READ) == 0) return;
#endif
  unsigned char sink = 0;
  for (size_t off = 0; off < n; off += page) {
    sink ^= *reinterpret_cast<const volatile unsigned char*>(bytes + off);
  }
  (void)sink;
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
