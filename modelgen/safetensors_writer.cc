#include "modelgen/safetensors_writer.h"

#include <cstring>

#include "common/check.h"
#include "common/strings.h"
#include "model/safetensors.h"
#include "nlohmann/json.hpp"

namespace baton::modelgen {

void SafetensorsWriter::AddTensor(std::string_view name, cpu::DType dtype,
                                  std::vector<int64_t> shape, TensorDataFn data) {
  // safetensors has no block-quantized types; callers write Q8_0 to GGUF only.
  BATON_CHECK(dtype != cpu::DType::kQ8_0);
  uint64_t n = dtype == cpu::DType::kF32 ? 4 : 2;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  tensors_.push_back(Tensor{std::string(name), dtype, std::move(shape), data_size_, data_size_ + n,
                            std::move(data)});
  data_size_ += n;
}

void SafetensorsWriter::AddTensorBytes(std::string_view name, cpu::DType dtype,
                                       std::vector<int64_t> shape, std::string bytes) {
  AddTensor(name, dtype, std::move(shape),
            [bytes = std::move(bytes)](const auto& write) { write(bytes); });
}

std::string SafetensorsWriter::Header() const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  for (const Tensor& t : tensors_) {
    header[t.name] = {{"dtype", model::SafetensorsDTypeName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {t.begin, t.end}}};
  }
  std::string json = header.dump();
  // Pad so the data starts 8-byte aligned (8 + json length is a multiple of 8).
  json.resize((json.size() + 7) / 8 * 8, ' ');
  std::string out(8, '\0');
  const uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  return out + json;
}

uint64_t SafetensorsWriter::FileSize() const { return Header().size() + data_size_; }

absl::Status SafetensorsWriter::Write(
    ByteSink& sink, const std::function<void(uint64_t, uint64_t)>& progress) const {
  const std::string header = Header();
  const uint64_t total = header.size() + data_size_;
  sink.Write(header);
  for (const Tensor& t : tensors_) {
    uint64_t produced = 0;
    t.data([&](std::string_view chunk) {
      produced += chunk.size();
      sink.Write(chunk);
    });
    if (produced != t.end - t.begin) {
      return absl::InternalError(baton::StrCat("safetensors writer: tensor '", t.name,
                                               "' produced ", produced, " bytes, expected ",
                                               t.end - t.begin));
    }
    if (progress) progress(sink.written(), total);
  }
  return absl::OkStatus();
}

absl::Status SafetensorsWriter::WriteFile(
    const std::string& path, const std::function<void(uint64_t, uint64_t)>& progress) const {
  FileSink sink;
  absl::Status status = FileSink::Open(path, &sink);
  if (!status.ok()) return status;
  status = Write(sink, progress);
  if (!status.ok()) return status;
  return sink.Close();
}

absl::StatusOr<std::string> SafetensorsWriter::WriteString() const {
  std::string out;
  StringSink sink(&out);
  absl::Status status = Write(sink);
  if (!status.ok()) return status;
  return out;
}

}  // namespace baton::modelgen
