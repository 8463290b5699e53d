// Writes GGUF v3 files: metadata of the common value types, then tensor infos, then the
// tensor data, each tensor aligned to 32 bytes (the format's default alignment).
//
//   GgufWriter w;
//   w.AddString("general.architecture", "llama");
//   w.AddUint32("llama.block_count", 2);
//   w.AddTensor("output_norm.weight", {64}, GgufType::kF32, data_fn);
//   BATON_RETURN_IF_ERROR(w.WriteFile("model.gguf"));
//
// Tensor data is produced when written (TensorDataFn), so multi-GB files stream.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "modelgen/byte_sink.h"

namespace baton::modelgen {

// ggml's type ids of the types Baton writes.
enum class GgufType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

class GgufWriter {
 public:
  void AddString(std::string_view key, std::string_view value);
  void AddUint32(std::string_view key, uint32_t value);
  void AddInt32(std::string_view key, int32_t value);
  void AddUint64(std::string_view key, uint64_t value);
  void AddFloat32(std::string_view key, float value);
  void AddBool(std::string_view key, bool value);
  void AddStringArray(std::string_view key, const std::vector<std::string>& values);
  void AddInt32Array(std::string_view key, const std::vector<int32_t>& values);
  void AddFloat32Array(std::string_view key, const std::vector<float>& values);

  // `dims` in ggml order: dims[0] is the contiguous one ({in, out} for a linear weight).
  // dims[0] must be a multiple of the type's block (32 or 256 for the quantized types). `data` must
  // produce exactly the tensor's bytes (checked when written).
  void AddTensor(std::string_view name, std::vector<uint64_t> dims, GgufType type,
                 TensorDataFn data);
  void AddTensorBytes(std::string_view name, std::vector<uint64_t> dims, GgufType type,
                      std::string bytes);

  // Total size of the file Write will produce.
  uint64_t FileSize() const;
  // `progress` (optional) is called after each tensor with bytes written and the total.
  absl::Status Write(ByteSink& sink,
                     const std::function<void(uint64_t, uint64_t)>& progress = {}) const;
  absl::Status WriteFile(const std::string& path,
                         const std::function<void(uint64_t, uint64_t)>& progress = {}) const;
  absl::StatusOr<std::string> WriteString() const;

  static uint64_t TensorBytes(const std::vector<uint64_t>& dims, GgufType type);

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    GgufType type;
    uint64_t nbytes;
    uint64_t offset;
    TensorDataFn data;
  };
  std::string Header() const;

  uint64_t kv_count_ = 0;
  std::string kv_;  // the encoded metadata section
  std::vector<Tensor> tensors_;
  uint64_t data_size_ = 0;
};

}  // namespace baton::modelgen
