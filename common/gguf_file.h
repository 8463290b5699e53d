// A bounds-checked reader of the GGUF container (versions 2 and 3, little-endian): the
// header, the metadata key/values and the tensor infos. It reads in place: strings and
// arrays stay in the caller's bytes (usually a MappedFile) and arrays are decoded only
// when a getter asks, so a 150k-entry vocabulary costs one validating pass at Parse.
//
//   BATON_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::Open(path));
//   BATON_ASSIGN_OR_RETURN(gguf::File file, gguf::File::Parse(mapped.view()));
//   BATON_ASSIGN_OR_RETURN(auto tokens, file.GetStringArray("tokenizer.ggml.tokens"));
//
// Every malformed or over-limit file is an InvalidArgument whose message names the field;
// an absent key is NotFound. Nothing read from the file is trusted before it is checked
// against the bytes that remain, so a huge count fails fast instead of allocating.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"

namespace baton::gguf {

enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "uint32", "string", ...; "unknown" for values outside the enum.
std::string_view ValueTypeName(ValueType type);

// Every count read from a file is checked against these and against the file size.
struct Limits {
  uint64_t max_kv = 1 << 20;  // metadata entries
  uint64_t max_tensors = 1 << 20;
  uint64_t max_string_bytes = 1 << 26;  // one string
  uint64_t max_array_len = 1 << 26;
  uint32_t max_dims = 4;
};

// Block geometry of a ggml tensor type (as in gguf-py's GGML_QUANT_SIZES): `block_elems`
// elements are stored in `block_bytes` bytes. Returns false for a type this reader does
// not know (removed or newer than this table).
bool GgmlTypeGeometry(uint32_t type, uint64_t* block_elems, uint64_t* block_bytes);

struct TensorInfo {
  std::string_view name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the contiguous (row) dimension
  uint32_t type;               // ggml type id; see GgmlTypeGeometry
  uint64_t offset;             // relative to File::data_offset(); a multiple of alignment()
  uint64_t nbytes;             // size of the data; [data_offset+offset, +nbytes) is in the file
                               // and overlaps no other tensor's
};

// True for a path ending in .gguf or a file starting with the GGUF magic.
bool LooksLikeGgufFile(const std::string& path);

// The .gguf files directly inside `dir` (none if it cannot be read).
std::vector<std::string> GgufFilesIn(const std::string& dir);

class File {
 public:
  // Parses header, metadata and tensor infos of `bytes` (which must outlive the File).
  static absl::StatusOr<File> Parse(std::string_view bytes, const Limits& limits = {});

  uint32_t version() const { return version_; }
  bool Has(std::string_view key) const { return index_.contains(key); }
  ValueType TypeOf(std::string_view key) const;  // precondition: Has(key)
  // For an array value, its element type and length; NotFound / InvalidArgument otherwise.
  absl::StatusOr<ValueType> ArrayElementType(std::string_view key) const;
  absl::StatusOr<uint64_t> ArrayLength(std::string_view key) const;

  // Typed getters: NotFound if absent, InvalidArgument naming the key if the type is wrong.
  absl::StatusOr<std::string_view> GetString(std::string_view key) const;
  absl::StatusOr<uint64_t> GetUint(std::string_view key) const;  // any int type, value >= 0
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;    // any int type
  absl::StatusOr<double> GetFloat(std::string_view key) const;   // f32/f64 (and ints)
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<std::vector<std::string_view>> GetStringArray(std::string_view key) const;
  absl::StatusOr<std::vector<float>> GetFloatArray(std::string_view key) const;  // f32 array
  absl::StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;  // any int array

  std::vector<std::string_view> Keys() const;  // in file order
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* FindTensor(std::string_view name) const;  // nullptr if absent
  uint64_t alignment() const { return alignment_; }           // general.alignment, default 32
  // Start of tensor data: the end of the tensor infos rounded up to alignment(). In a file
  // without tensors (a vocab-only file) it may lie past the end of the file.
  uint64_t data_offset() const { return data_offset_; }

  // One metadata value, left in the file's bytes.
  struct Entry {
    std::string_view key;
    ValueType type;
    ValueType elem_type;    // arrays only
    uint64_t count;         // arrays only
    std::string_view data;  // scalar: its bytes; string: its text; array: all element bytes
  };

 private:
  File() = default;
  absl::StatusOr<const Entry*> Find(std::string_view key) const;

  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<Entry> entries_;
  std::unordered_map<std::string_view, size_t> index_;  // key -> entries_ index
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace baton::gguf
