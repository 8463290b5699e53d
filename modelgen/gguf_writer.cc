#include "modelgen/gguf_writer.h"

#include <cstring>

#include "common/check.h"
#include "common/gguf_file.h"
#include "common/strings.h"

namespace baton::modelgen {
namespace {

constexpr uint64_t kAlignment = 32;
// gguf value type ids.
constexpr uint32_t kUint32 = 4, kInt32 = 5, kFloat32 = 6, kBool = 7, kString = 8, kArray = 9,
                   kUint64 = 10;

template <typename T>
void Put(std::string* out, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  out->append(buf, sizeof(T));
}

void PutString(std::string* out, std::string_view s) {
  Put<uint64_t>(out, s.size());
  out->append(s);
}

uint64_t AlignUp(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

void GgufWriter::AddString(std::string_view key, std::string_view value) {
  PutString(&kv_, key);
  Put<uint32_t>(&kv_, kString);
  PutString(&kv_, value);
  ++kv_count_;
}

void GgufWriter::AddUint32(std::string_view key, uint32_t value) {
  PutString(&kv_, key);
  Put<uint32_t>(&kv_, kUint32);
  Put(&kv_, value);
  ++kv_count_;
}

void GgufWriter::AddInt32(std::string_view key, int32_t value) {
  PutString(&kv_, key);
  Put<uint32_t>(&kv_, kInt32);
  Put(&kv_, value);
  ++kv_count_;
}

void GgufWriter::AddUint64(std::string_view key, uint64_t value) {
  PutString(&kv_, key);
  Put<uint32_t>(&kv_, kUint64);
  Put(&kv_, value);
  ++kv_count_;
}

void GgufWriter::AddFloat32(std::string_view key, float value) {
  PutString(&kv_, key);
  Put<uint32_t>(&kv_, kFloat32);
  Put(&kv_, value);
  ++kv_count_;
}

void GgufWriter::AddBool(std::string_view key, bool value) {
  PutString(&kv_, key);
  Put<uint32_t>(&kv_, kBool);
  Put<uint8_t>(&kv_, value ? 1 : 0);
  ++kv_count_;
}

void GgufWriter::AddStringArray(std::string_view key, const std::vector<std::string>& values) {
  PutString(&kv_, key);
  Put<uint32_t>(&kv_, kArray);
  Put<uint32_t>(&kv_, kString);
  Put<uint64_t>(&kv_, values.size());
  for (const std::string& v : values) PutString(&kv_, v);
  ++kv_count_;
}

void GgufWriter::AddInt32Array(std::string_view key, const std::vector<int32_t>& values) {
  PutString(&kv_, key);
  Put<uint32_t>(&kv_, kArray);
  Put<uint32_t>(&kv_, kInt32);
  Put<uint64_t>(&kv_, values.size());
  for (int32_t v : values) Put(&kv_, v);
  ++kv_count_;
}

void GgufWriter::AddFloat32Array(std::string_view key, const std::vector<float>& values) {
  PutString(&kv_, key);
  Put<uint32_t>(&kv_, kArray);
  Put<uint32_t>(&kv_, kFloat32);
  Put<uint64_t>(&kv_, values.size());
  for (float v : values) Put(&kv_, v);
  ++kv_count_;
}

uint64_t GgufWriter::TensorBytes(const std::vector<uint64_t>& dims, GgufType type) {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  uint64_t block_elems = 1, block_bytes = 0;
  BATON_CHECK(gguf::GgmlTypeGeometry(static_cast<uint32_t>(type), &block_elems, &block_bytes));
  return n / block_elems * block_bytes;
}

void GgufWriter::AddTensor(std::string_view name, std::vector<uint64_t> dims, GgufType type,
                           TensorDataFn data) {
  uint64_t block_elems = 1, block_bytes = 0;
  BATON_CHECK(gguf::GgmlTypeGeometry(static_cast<uint32_t>(type), &block_elems, &block_bytes));
  BATON_CHECK(block_elems == 1 || (!dims.empty() && dims[0] % block_elems == 0));
  const uint64_t nbytes = TensorBytes(dims, type);
  tensors_.push_back(
      Tensor{std::string(name), std::move(dims), type, nbytes, data_size_, std::move(data)});
  data_size_ = AlignUp(data_size_ + nbytes);
}

void GgufWriter::AddTensorBytes(std::string_view name, std::vector<uint64_t> dims, GgufType type,
                                std::string bytes) {
  AddTensor(name, std::move(dims), type,
            [bytes = std::move(bytes)](const auto& write) { write(bytes); });
}

std::string GgufWriter::Header() const {
  std::string h;
  h.append("GGUF");
  Put<uint32_t>(&h, 3);
  Put<uint64_t>(&h, tensors_.size());
  Put<uint64_t>(&h, kv_count_);
  h.append(kv_);
  for (const Tensor& t : tensors_) {
    PutString(&h, t.name);
    Put<uint32_t>(&h, static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) Put(&h, d);
    Put<uint32_t>(&h, static_cast<uint32_t>(t.type));
    Put(&h, t.offset);
  }
  h.resize(AlignUp(h.size()), '\0');
  return h;
}

uint64_t GgufWriter::FileSize() const { return Header().size() + data_size_; }

absl::Status GgufWriter::Write(ByteSink& sink,
                               const std::function<void(uint64_t, uint64_t)>& progress) const {
  const std::string header = Header();
  const uint64_t total = header.size() + data_size_;
  sink.Write(header);
  static const std::string kZeros(kAlignment, '\0');
  for (const Tensor& t : tensors_) {
    uint64_t produced = 0;
    t.data([&](std::string_view chunk) {
      produced += chunk.size();
      sink.Write(chunk);
    });
    if (produced != t.nbytes) {
      return absl::InternalError(baton::StrCat("gguf writer: tensor '", t.name, "' produced ",
                                               produced, " bytes, expected ", t.nbytes));
    }
    sink.Write(std::string_view(kZeros).substr(0, AlignUp(t.nbytes) - t.nbytes));
    if (progress) progress(sink.written(), total);
  }
  return absl::OkStatus();
}

absl::Status GgufWriter::WriteFile(const std::string& path,
                                   const std::function<void(uint64_t, uint64_t)>& progress) const {
  FileSink sink;
  absl::Status status = FileSink::Open(path, &sink);
  if (!status.ok()) return status;
  status = Write(sink, progress);
  if (!status.ok()) return status;
  return sink.Close();
}

absl::StatusOr<std::string> GgufWriter::WriteString() const {
  std::string out;
  StringSink sink(&out);
  absl::Status status = Write(sink);
  if (!status.ok()) return status;
  return out;
}

}  // namespace baton::modelgen
