// The rendezvous store a group meets through: each rank publishes what the others need to
// reach it (its gloo address, or rank 0's NCCL unique id) under a key, and reads theirs.
// torchrun and gloo do the same with their stores.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace baton::parallel {

class Store {
 public:
  virtual ~Store() = default;
  virtual absl::Status Set(const std::string& key, std::string_view value) = 0;
  // The value of `key`, waiting up to `timeout` for some rank to set it;
  // DeadlineExceeded naming the key when none does.
  virtual absl::StatusOr<std::string> Get(const std::string& key,
                                          std::chrono::milliseconds timeout) = 0;
};

// A store in a directory that every rank can read: one file per key, written under a
// temporary name and renamed, so a reader never sees half a value. For ranks on one host
// (`baton serve`, tests); the directory should be private to the group (mode 0700).
class FileStore : public Store {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}
  absl::Status Set(const std::string& key, std::string_view value) override;
  absl::StatusOr<std::string> Get(const std::string& key,
                                  std::chrono::milliseconds timeout) override;
  const std::string& dir() const { return dir_; }

 private:
  std::string PathOf(const std::string& key) const;
  std::string dir_;
};

}  // namespace baton::parallel
