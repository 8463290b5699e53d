#include "common/mapped_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace baton {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// Writes with one write() call per `chunk` bytes. The page cache keeps what it writes in
// folios no larger than a call, so 4 KiB calls leave a file cached in 4 KiB folios.
std::string WriteFile(const std::string& name, const std::string& bytes,
                      size_t chunk = size_t{1} << 30) {
  // ctest runs each test in its own process, side by side: the pid keeps their files apart.
  std::string path =
      ::testing::TempDir() + "/mapped_file_test_" + std::to_string(::getpid()) + "_" + name;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  EXPECT_GE(fd, 0) << path;
  for (size_t off = 0; off < bytes.size(); off += chunk) {
    const size_t n = std::min(chunk, bytes.size() - off);
    EXPECT_EQ(::write(fd, bytes.data() + off, n), static_cast<ssize_t>(n));
  }
  ::close(fd);
  return path;
}

// Drops a file from the page cache, as a reboot would.
void DropFromPageCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fdatasync(fd), 0);
  ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
  ::close(fd);
}

size_t TouchAll(const MappedFile& f) {
  size_t sum = 0;
  for (size_t i = 0; i < f.size(); i += 4096) sum += static_cast<unsigned char>(f.view()[i]);
  return sum;
}

// Sizes on both sides of the 2 MiB page and of the 4 MiB threshold for aligned maps.
TEST(MappedFileTest, BothBackingsHoldTheFileBytes) {
  for (size_t size : {size_t{1}, size_t{4095}, 2 * kMiB - 1, 2 * kMiB, 4 * kMiB - 1, 4 * kMiB,
                      4 * kMiB + 12345, 9 * kMiB + 7}) {
    const std::string bytes = RandomBytes(size, static_cast<uint32_t>(size));
    const std::string path = WriteFile(std::to_string(size), bytes);
    for (auto backing : {MappedFile::Backing::kFileMap, MappedFile::Backing::kAnonymousCopy}) {
      absl::StatusOr<MappedFile> f = MappedFile::Open(path, backing);
      ASSERT_TRUE(f.ok()) << f.status();
      ASSERT_EQ(f->size(), size);
      EXPECT_TRUE(f->view() == bytes) << "size " << size;
    }
    std::filesystem::remove(path);
  }
}

TEST(MappedFileTest, AnEmptyFileMapsToNothing) {
  const std::string path = WriteFile("empty", "");
  absl::StatusOr<MappedFile> f = MappedFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->size(), 0u);
  EXPECT_EQ(f->HugePageBytes(), 0u);
  std::filesystem::remove(path);
}

// Whether this kernel maps a cold file in TempDir() with 2 MiB pages (large page-cache
// folios); the tests below need it and skip, saying so, where it cannot.
bool ColdFileGetsHugePages() {
  const std::string bytes = RandomBytes(8 * kMiB, 3);
  const std::string cold = WriteFile("cold", bytes);
  DropFromPageCache(cold);
  absl::StatusOr<MappedFile> f = MappedFile::Open(cold);
  EXPECT_TRUE(f.ok()) << f.status();
  const bool huge = f.ok() && TouchAll(*f) > 0 && f->HugePageBytes() > 0;
  if (huge) {
    EXPECT_EQ(f->HugePageBytes(), bytes.size());
  }
  std::filesystem::remove(cold);
  return huge;
}

#define SKIP_WITHOUT_LARGE_FOLIOS()                                          \
  if (!ColdFileGetsHugePages())                                              \
  GTEST_SKIP() << "this kernel or file system maps " << ::testing::TempDir() \
               << " with 4 KiB pages only (no large page-cache folios)"

// A file just written sits in the page cache in small folios. Where the kernel can map a
// cold file with 2 MiB pages, the map must drop those folios and get 2 MiB pages too.
TEST(MappedFileTest, AFileJustWrittenGetsHugePagesWhereAColdFileDoes) {
  SKIP_WITHOUT_LARGE_FOLIOS();
  const std::string bytes = RandomBytes(8 * kMiB, 4);
  const std::string hot = WriteFile("hot", bytes, 4096);  // cached now, in 4 KiB folios
  absl::StatusOr<MappedFile> f = MappedFile::Open(hot);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_GT(TouchAll(*f), 0u);
  EXPECT_EQ(f->HugePageBytes(), bytes.size());
  EXPECT_TRUE(f->view() == bytes);
  std::filesystem::remove(hot);
}

// A file whose start is cached in 2 MiB folios but whose rest is in 4 KiB ones passes
// Open's test of the first 2 MiB; RecacheSmallPages, after a pass, drops it, and the next
// pass gets 2 MiB pages throughout.
TEST(MappedFileTest, RecacheSmallPagesFixesAFilePartlyCachedSmall) {
  SKIP_WITHOUT_LARGE_FOLIOS();
  const std::string bytes = RandomBytes(8 * kMiB, 5);
  const std::string path = WriteFile("partly", bytes, 4096);
  {
    const int fd = ::open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fdatasync(fd), 0);
    ASSERT_EQ(::posix_fadvise(fd, 0, 2 * kMiB, POSIX_FADV_DONTNEED), 0);  // the start only
    ::close(fd);
  }
  absl::StatusOr<MappedFile> f = MappedFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_GT(TouchAll(*f), 0u);
  EXPECT_EQ(f->HugePageBytes(), 2 * kMiB);  // the start, dropped and re-read by Open
  EXPECT_TRUE(f->RecacheSmallPages());
  EXPECT_GT(TouchAll(*f), 0u);
  EXPECT_EQ(f->HugePageBytes(), bytes.size());
  EXPECT_TRUE(f->view() == bytes);
  EXPECT_FALSE(f->RecacheSmallPages());  // checked once
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace baton
