// Shared helpers of the model tests: test data paths, temporary directories, small
// configs, and file access.
#pragma once

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/cpu/matmul.h"
#include "model/float_convert.h"
#include "model/model_config.h"
#include "tests/fuzz/micro_model.h"

namespace baton::model::testing {

inline std::string TestDataPath(const std::string& relative) {
  return std::string(BATON_TESTDATA_DIR) + "/" + relative;
}

#define BATON_REQUIRE_MODEL_TESTDATA(relative)                                               \
  do {                                                                                       \
    if (!std::filesystem::exists(::baton::model::testing::TestDataPath(relative))) {         \
      GTEST_SKIP() << "testdata absent: " << ::baton::model::testing::TestDataPath(relative) \
                   << " (run with ../shared/testdata beside the checkout)";                  \
    }                                                                                        \
  } while (false)

// A fresh directory under the system temp dir, removed at destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "baton_model_XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Row `row` of a matrix as f32, whatever its stored type.
inline std::vector<float> RowOf(const cpu::MatrixRef& m, int64_t row) {
  std::vector<float> out(static_cast<size_t>(m.cols));
  cpu::DequantizeRow(m, row, out.data());
  return out;
}

// The raw bytes of a matrix.
inline std::string_view BytesOf(const cpu::MatrixRef& m) {
  return {static_cast<const char*>(m.data),
          static_cast<size_t>(m.rows) * cpu::RowBytes(m.dtype, m.cols)};
}

}  // namespace baton::model::testing
