// Where the model writers put their bytes: a file (streamed, for multi-GB models) or a
// string (tests, fuzz seeds). Tensor data is produced in chunks by a callback, so a writer
// never holds a whole model in memory.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace baton::modelgen {

// Produces one tensor's bytes by calling `write` with consecutive chunks.
using TensorDataFn = std::function<void(const std::function<void(std::string_view)>& write)>;

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void Write(std::string_view bytes) = 0;
  uint64_t written() const { return written_; }

 protected:
  uint64_t written_ = 0;
};

class StringSink : public ByteSink {
 public:
  explicit StringSink(std::string* out) : out_(out) {}
  void Write(std::string_view bytes) override {
    out_->append(bytes);
    written_ += bytes.size();
  }

 private:
  std::string* out_;
};

// Writes to `path`.partial and renames it to `path` on Close, so a reader never sees a
// half-written model under the final name.
class FileSink : public ByteSink {
 public:
  static absl::Status Open(const std::string& path, FileSink* sink);
  FileSink() = default;
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;
  ~FileSink() override;
  void Write(std::string_view bytes) override;
  absl::Status Close();  // flushes, checks every write, renames into place

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  bool failed_ = false;
};

}  // namespace baton::modelgen
