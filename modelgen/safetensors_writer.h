// Writes one safetensors file: the 8-byte header length, the JSON header (tensors in the
// order added, an optional __metadata__), padded with spaces to a multiple of 8 as the
// reference library does so that data is aligned, then the data.
//
//   SafetensorsWriter w;
//   w.AddTensor("model.norm.weight", cpu::DType::kF32, {64}, data_fn);
//   BATON_RETURN_IF_ERROR(w.WriteFile(dir + "/model.safetensors"));
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/matmul.h"
#include "modelgen/byte_sink.h"

namespace baton::modelgen {

class SafetensorsWriter {
 public:
  void SetMetadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  // dtype: kF32, kF16 or kBF16. `shape` outermost first ([out, in] for a linear weight).
  void AddTensor(std::string_view name, cpu::DType dtype, std::vector<int64_t> shape,
                 TensorDataFn data);
  void AddTensorBytes(std::string_view name, cpu::DType dtype, std::vector<int64_t> shape,
                      std::string bytes);

  uint64_t FileSize() const;
  absl::Status Write(ByteSink& sink,
                     const std::function<void(uint64_t, uint64_t)>& progress = {}) const;
  absl::Status WriteFile(const std::string& path,
                         const std::function<void(uint64_t, uint64_t)>& progress = {}) const;
  absl::StatusOr<std::string> WriteString() const;

 private:
  struct Tensor {
    std::string name;
    cpu::DType dtype;
    std::vector<int64_t> shape;
    uint64_t begin, end;
    TensorDataFn data;
  };
  std::string Header() const;  // length prefix + padded JSON

  std::map<std::string, std::string> metadata_;
  std::vector<Tensor> tensors_;
  uint64_t data_size_ = 0;
};

}  // namespace baton::modelgen
