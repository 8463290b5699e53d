// Fuzzes gguf::File::Parse and every getter on what it accepts. Besides "no crash", it
// checks the promises callers rely on: tensor data lies inside the input, strings lie
// inside the input, and data_offset is aligned.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/gguf_file.h"

namespace {

void Require(bool cond) {
  if (!cond) std::abort();
}

bool Inside(std::string_view outer, std::string_view inner) {
  return inner.empty() || (inner.data() >= outer.data() &&
                           inner.data() + inner.size() <= outer.data() + outer.size());
}

void Exercise(std::string_view bytes, const baton::gguf::Limits& limits) {
  using baton::gguf::File;
  absl::StatusOr<File> file = File::Parse(bytes, limits);
  if (!file.ok()) {
    Require(!file.status().message().empty());
    return;
  }
  Require(file->alignment() != 0 && (file->alignment() & (file->alignment() - 1)) == 0);
  Require(file->data_offset() % file->alignment() == 0);
  for (const baton::gguf::TensorInfo& t : file->tensors()) {
    Require(Inside(bytes, t.name));
    Require(t.dims.size() <= limits.max_dims);
    Require(t.offset % file->alignment() == 0);
    Require(file->data_offset() <= bytes.size());
    Require(t.offset <= bytes.size() - file->data_offset());
    Require(t.nbytes <= bytes.size() - file->data_offset() - t.offset);
    Require(file->FindTensor(t.name) != nullptr);
  }
  for (std::string_view key : file->Keys()) {
    Require(Inside(bytes, key) && file->Has(key));
    (void)file->TypeOf(key);
    if (absl::StatusOr<std::string_view> s = file->GetString(key); s.ok()) {
      Require(Inside(bytes, *s));
    }
    (void)file->GetUint(key);
    (void)file->GetInt(key);
    (void)file->GetFloat(key);
    (void)file->GetBool(key);
    (void)file->ArrayElementType(key);
    if (absl::StatusOr<uint64_t> n = file->ArrayLength(key); n.ok()) {
      if (auto strings = file->GetStringArray(key); strings.ok()) {
        Require(strings->size() == *n);
        for (std::string_view s : *strings) Require(Inside(bytes, s));
      }
      if (auto floats = file->GetFloatArray(key); floats.ok()) Require(floats->size() == *n);
      if (auto ints = file->GetIntArray(key); ints.ok()) Require(ints->size() == *n);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  Exercise(bytes, {});
  // Tight limits reach the limit checks with inputs the fuzzer can actually build.
  Exercise(
      bytes,
      {.max_kv = 8, .max_tensors = 4, .max_string_bytes = 64, .max_array_len = 16, .max_dims = 2});
  return 0;
}
