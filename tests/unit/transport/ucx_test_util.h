// Shared by the UCX transfer test, its peer process and kv_transfer_bench: test bytes, hex,
// and a child process spoken to line by line over its stdin and stdout.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/subprocess.h"

namespace baton::testing {

// Bytes that differ at every offset and between seeds.
inline std::vector<uint8_t> Pattern(size_t bytes, uint64_t seed) {
  std::vector<uint8_t> out(bytes);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < bytes; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = static_cast<uint8_t>(x);
  }
  return out;
}

inline std::string Hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

inline std::string Unhex(std::string_view hex) {
  auto value = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(value(hex[i]) * 16 + value(hex[i + 1])));
  }
  return out;
}

// A child process with pipes to its stdin and stdout, for tests and benchmarks:
// common/subprocess.h, with a failure to start reported on stderr (the caller then reads
// nothing). The destructor kills it (SIGKILL) unless it was waited for.
class ChildProcess {
 public:
  // argv[0] is looked up in PATH; `env` entries ("NAME=value") are set in the child's.
  explicit ChildProcess(std::vector<std::string> argv, std::vector<std::string> env = {}) {
    SubprocessOptions o;
    o.search_path = true;
    o.env = std::move(env);
    o.pipe_stdin = true;
    auto p = Subprocess::Start(std::move(argv), o);
    if (!p.ok()) {
      std::fprintf(stderr, "ChildProcess: %s\n", p.status().ToString().c_str());
      return;
    }
    p_ = *std::move(p);
  }

  // One line without its newline; "" at the end of its output.
  std::string ReadLine() {
    if (p_ == nullptr) return "";
    return p_->ReadLine().value_or("");
  }
  bool AtEnd() const { return p_ == nullptr || p_->AtEnd(); }
  pid_t pid() const { return p_ == nullptr ? -1 : p_->pid(); }
  void WriteLine(const std::string& s) {
    if (p_ != nullptr) p_->WriteLine(s);
  }
  // End of input for the child, which a line-reading child takes as the end.
  void CloseInput() {
    if (p_ != nullptr) p_->CloseInput();
  }
  void Signal(int sig) {
    if (p_ != nullptr) p_->Signal(sig);
  }
  // Its exit code, or 128 + the signal that ended it.
  int Wait() { return p_ == nullptr ? -1 : p_->Wait(); }

 private:
  std::unique_ptr<Subprocess> p_;
};

}  // namespace baton::testing
