// A bounds-checked reader of the safetensors format (one file, read in place) and of the
// sharded form's model.safetensors.index.json.
//
//   BATON_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::Open(path));
//   BATON_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Parse(mapped.view(), path));
//   const SafetensorsTensor* t = file.Find("model.norm.weight");
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON (tensor name ->
// {dtype, shape, data_offsets: [begin, end]}, plus an optional "__metadata__" object of
// strings), then the data; offsets are relative to the data. Everything is checked before
// use: N against a limit and the file size; each dtype (F32, F16, BF16 only), rank (<= 4),
// dimension (>= 0) and the element count (overflow); each [begin, end) inside the data,
// of exactly count * element-size bytes, aligned to the element size in the file, and not
// overlapping another tensor. Every failure is an InvalidArgument naming the tensor and
// the field.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/matmul.h"

namespace baton::model {

struct SafetensorsLimits {
  uint64_t max_header_bytes = uint64_t{100} << 20;  // about the reference library's 100 MB
  uint64_t max_tensors = uint64_t{1} << 20;
  size_t max_rank = 4;
};

struct SafetensorsTensor {
  std::string name;
  cpu::DType dtype = cpu::DType::kF32;  // kF32, kF16 or kBF16
  std::vector<int64_t> shape;           // outermost first ([out, in] for a linear weight)
  std::string_view data;                // inside the bytes given to Parse
};

class SafetensorsFile {
 public:
  // `bytes` must outlive the result; `source` names the file in messages.
  static absl::StatusOr<SafetensorsFile> Parse(std::string_view bytes, std::string_view source,
                                               const SafetensorsLimits& limits = {});

  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* Find(const std::string& name) const;  // nullptr if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// model.safetensors.index.json: which shard file holds each tensor.
struct SafetensorsIndex {
  std::unordered_map<std::string, std::string> weight_map;  // tensor name -> shard file name
  std::vector<std::string> shards;                          // distinct shard names, sorted
};

// Shard names must be plain file names in the index's directory: no '/', '\', NUL, and
// not "." or "..", so an index cannot point outside the model directory.
inline constexpr size_t kMaxSafetensorsShards = 4096;
// The safetensors dtype string of a matrix type: "F32", "F16", "BF16" ("?" for Q8_0,
// which safetensors cannot hold).
const char* SafetensorsDTypeName(cpu::DType dtype);

absl::StatusOr<SafetensorsIndex> ParseSafetensorsIndex(std::string_view json_text,
                                                       std::string_view source);

}  // namespace baton::model
