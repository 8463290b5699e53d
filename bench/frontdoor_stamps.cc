#include "bench/frontdoor_stamps.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cstring>
#include <thread>

#include "common/strings.h"

namespace baton::bench {

// Plain integers, shared across processes; every access that another process may race
// with goes through std::atomic_ref.
struct StampTable::Header {
  int64_t magic;
  int64_t slots;
  int64_t tokens;
  int64_t ended_calls;
  int64_t interval_us;
  int64_t aligned;
};

namespace {

constexpr int64_t kMagic = 0x53544d5042544e31;  // "1NTBPMTS": a table of this layout
constexpr int64_t kMaxSlots = int64_t{1} << 20;
constexpr int64_t kMaxTokens = int64_t{1} << 20;
constexpr int64_t kMaxBytes = int64_t{1} << 30;

std::atomic_ref<int64_t> Shared(int64_t& v) { return std::atomic_ref<int64_t>(v); }

}  // namespace

int64_t StampSlot(std::string_view request_id) {
  const size_t hash = request_id.rfind('#');
  if (hash == std::string_view::npos) return -1;
  const std::string_view digits = request_id.substr(hash + 1);
  int64_t slot = -1;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), slot);
  if (ec != std::errc() || end != digits.data() + digits.size() || slot < 0) return -1;
  return slot;
}

StampTable::StampTable(int fd, void* base, size_t bytes) : fd_(fd), base_(base), bytes_(bytes) {}

StampTable::~StampTable() {
  munmap(base_, bytes_);
  close(fd_);
}

absl::StatusOr<std::unique_ptr<StampTable>> StampTable::Create(int64_t slots, int64_t tokens) {
  if (slots < 1 || slots > kMaxSlots || tokens < 1 || tokens > kMaxTokens ||
      (slots * (tokens + 1) + 6) * 8 > kMaxBytes) {
    return absl::InvalidArgumentError(StrCat("a stamp table of ", slots, " requests of ", tokens,
                                             " events is outside 1..", kMaxSlots, " by 1..",
                                             kMaxTokens, " and ", kMaxBytes, " bytes"));
  }
  // Without MFD_CLOEXEC: the stub process inherits it across exec.
  const int fd = memfd_create("frontdoor_stamps", 0);
  if (fd < 0) return absl::InternalError(StrCat("memfd_create: ", std::strerror(errno)));
  const size_t bytes = sizeof(Header) + static_cast<size_t>(slots * (tokens + 1)) * 8;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    close(fd);
    return absl::InternalError(StrCat("ftruncate of the stamp table: ", std::strerror(errno)));
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    close(fd);
    return absl::InternalError(StrCat("mmap of the stamp table: ", std::strerror(errno)));
  }
  std::unique_ptr<StampTable> t(new StampTable(fd, base, bytes));
  Header* h = t->header();  // the memfd starts zeroed
  h->slots = slots;
  h->tokens = tokens;
  Shared(h->magic).store(kMagic, std::memory_order_release);
  return t;
}

absl::StatusOr<std::unique_ptr<StampTable>> StampTable::Attach(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    return absl::InvalidArgumentError(StrCat("--stamps-fd ", fd, " is not open"));
  }
  const auto bytes = static_cast<size_t>(st.st_size);
  if (bytes < sizeof(Header) || st.st_size > kMaxBytes) {
    close(fd);
    return absl::InvalidArgumentError(
        StrCat("--stamps-fd ", fd, " has ", st.st_size, " bytes; not a stamp table"));
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    close(fd);
    return absl::InternalError(StrCat("mmap of --stamps-fd ", fd, ": ", std::strerror(errno)));
  }
  std::unique_ptr<StampTable> t(new StampTable(fd, base, bytes));
  const Header* h = t->header();
  if (Shared(t->header()->magic).load(std::memory_order_acquire) != kMagic || h->slots < 1 ||
      h->slots > kMaxSlots || h->tokens < 1 || h->tokens > kMaxTokens ||
      sizeof(Header) + static_cast<size_t>(h->slots * (h->tokens + 1)) * 8 != bytes) {
    return absl::InvalidArgumentError(
        StrCat("--stamps-fd ", fd, ": the header does not describe a stamp table"));
  }
  return t;
}

StampTable::Header* StampTable::header() const { return static_cast<Header*>(base_); }

int64_t* StampTable::slot_base(int64_t slot) const {
  auto* first = reinterpret_cast<int64_t*>(static_cast<char*>(base_) + sizeof(Header));
  return first + slot * (tokens() + 1);
}

int64_t StampTable::slots() const { return header()->slots; }
int64_t StampTable::tokens() const { return header()->tokens; }

void StampTable::set_interval(std::chrono::microseconds interval) {
  Shared(header()->interval_us).store(interval.count(), std::memory_order_release);
}

std::chrono::microseconds StampTable::interval() const {
  return std::chrono::microseconds(Shared(header()->interval_us).load(std::memory_order_acquire));
}

void StampTable::set_aligned(bool aligned) {
  Shared(header()->aligned).store(aligned ? 1 : 0, std::memory_order_release);
}

bool StampTable::aligned() const {
  return Shared(header()->aligned).load(std::memory_order_acquire) != 0;
}

void StampTable::Record(int64_t slot, const std::vector<Clock::time_point>& writes) {
  if (slot < 0 || slot >= slots()) return;
  int64_t* s = slot_base(slot);
  const int64_t n = std::min<int64_t>(tokens(), static_cast<int64_t>(writes.size()));
  for (int64_t i = 0; i < n; ++i) {
    s[1 + i] = std::chrono::duration_cast<std::chrono::nanoseconds>(
                   writes[static_cast<size_t>(i)].time_since_epoch())
                   .count();
  }
  Shared(s[0]).store(n, std::memory_order_release);
}

void StampTable::EndCall() {
  Shared(header()->ended_calls).fetch_add(1, std::memory_order_acq_rel);
}

void StampTable::Reset() {
  for (int64_t slot = 0; slot < slots(); ++slot) {
    Shared(slot_base(slot)[0]).store(0, std::memory_order_relaxed);
  }
  Shared(header()->ended_calls).store(0, std::memory_order_release);
}

absl::Status StampTable::WaitForCalls(int64_t count, absl::Duration timeout) const {
  // Polled: it runs between phases, when nothing is measured.
  const absl::Time deadline = absl::Now() + timeout;
  int64_t ended = 0;
  while ((ended = Shared(header()->ended_calls).load(std::memory_order_acquire)) < count) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(StrCat("the stub saw ", ended, " of ", count,
                                                " calls end within ",
                                                absl::FormatDuration(timeout)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return absl::OkStatus();
}

std::vector<Clock::time_point> StampTable::Stamps(int64_t slot) const {
  std::vector<Clock::time_point> out;
  if (slot < 0 || slot >= slots()) return out;
  int64_t* s = slot_base(slot);
  const int64_t n = Shared(s[0]).load(std::memory_order_acquire);
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    out.emplace_back(std::chrono::nanoseconds(s[1 + i]));
  }
  return out;
}

}  // namespace baton::bench
