#include "model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include "common/status.h"
#include "common/strings.h"
#include "nlohmann/json.hpp"

namespace baton::model {
namespace {

using nlohmann::json;

absl::Status Bad(std::string_view source, std::string_view what) {
  return absl::InvalidArgumentError(baton::StrCat(source, ": ", what));
}

// Names come from the file: cap them so a message stays readable.
std::string Quote(std::string_view name) {
  constexpr size_t kMax = 96;
  return baton::StrCat("'", name.substr(0, kMax), name.size() > kMax ? "'..." : "'");
}

struct DTypeInfo {
  const char* name;
  cpu::DType dtype;
  uint64_t size;
};
constexpr DTypeInfo kSupported[] = {
    {"F32", cpu::DType::kF32, 4}, {"F16", cpu::DType::kF16, 2}, {"BF16", cpu::DType::kBF16, 2}};

// Reads a JSON number as a non-negative integer; false for floats and negatives.
bool AsUint(const json& j, uint64_t* out) {
  if (j.is_number_unsigned()) {
    *out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer() && j.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(j.get<int64_t>());
    return true;
  }
  return false;
}

struct Span {
  uint64_t begin, end;
  size_t tensor;
};

absl::Status ParseTensor(const std::string& name, const json& j, std::string_view data,
                         uint64_t data_start, const SafetensorsLimits& limits,
                         std::string_view source, SafetensorsTensor* t, Span* span) {
  const std::string where = baton::StrCat("tensor ", Quote(name));
  if (!j.is_object()) return Bad(source, baton::StrCat(where, ": entry is not a JSON object"));
  if (!j.contains("dtype") || !j["dtype"].is_string()) {
    return Bad(source, baton::StrCat(where, ": 'dtype' is missing or not a string"));
  }
  const std::string& dtype = j["dtype"].get_ref<const std::string&>();
  const DTypeInfo* info = nullptr;
  for (const DTypeInfo& d : kSupported) {
    if (dtype == d.name) info = &d;
  }
  if (info == nullptr) {
    return Bad(source, baton::StrCat(where, " has dtype ", Quote(dtype),
                                     ", which is not supported (supported: F32, F16, BF16)"));
  }
  t->name = name;
  t->dtype = info->dtype;

  if (!j.contains("shape") || !j["shape"].is_array()) {
    return Bad(source, baton::StrCat(where, ": 'shape' is missing or not an array"));
  }
  const json& shape = j["shape"];
  if (shape.size() > limits.max_rank) {
    return Bad(source, baton::StrCat(where, ": rank ", shape.size(), " exceeds the limit (",
                                     limits.max_rank, ")"));
  }
  // Element counts are held in int64 (MatrixRef rows/cols), so the product must fit one.
  uint64_t count = 1;
  constexpr auto kMaxCount = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  for (size_t d = 0; d < shape.size(); ++d) {
    uint64_t dim;
    if (!AsUint(shape[d], &dim)) {
      return Bad(source, baton::StrCat(where, ": shape[", d, "] is not a non-negative integer"));
    }
    if (dim > kMaxCount || (dim != 0 && count > kMaxCount / dim)) {
      return Bad(source,
                 baton::StrCat(where, ": shape overflows int64 at shape[", d, "] (", dim, ")"));
    }
    count *= dim;
    t->shape.push_back(static_cast<int64_t>(dim));
  }

  if (!j.contains("data_offsets") || !j["data_offsets"].is_array() ||
      j["data_offsets"].size() != 2) {
    return Bad(source, baton::StrCat(where, ": 'data_offsets' must be [begin, end]"));
  }
  uint64_t begin, end;
  if (!AsUint(j["data_offsets"][0], &begin) || !AsUint(j["data_offsets"][1], &end)) {
    return Bad(source, baton::StrCat(where, ": data_offsets are not non-negative integers"));
  }
  if (begin > end || end > data.size()) {
    return Bad(source, baton::StrCat(where, ": data_offsets [", begin, ", ", end,
                                     "] lie outside the data section (", data.size(),
                                     " bytes; truncated file?)"));
  }
  uint64_t nbytes;
  if (__builtin_mul_overflow(count, info->size, &nbytes) || end - begin != nbytes) {
    return Bad(source, baton::StrCat(where, ": data_offsets [", begin, ", ", end, "] hold ",
                                     end - begin, " bytes, but shape and dtype ", dtype, " need ",
                                     count, " x ", info->size));
  }
  // Kernels read elements with their natural alignment; the file must place them so
  // (the reference writer pads the header to 8 bytes for this reason).
  if ((data_start + begin) % info->size != 0) {
    return Bad(source, baton::StrCat(where, ": data at file offset ", data_start + begin,
                                     " is not aligned to its ", info->size, "-byte elements"));
  }
  t->data = data.substr(begin, nbytes);
  *span = {begin, end, 0};
  return absl::OkStatus();
}

absl::Status ParseHeader(const json& header, std::string_view data, uint64_t data_start,
                         const SafetensorsLimits& limits, std::string_view source,
                         std::vector<SafetensorsTensor>* tensors,
                         std::map<std::string, std::string>* metadata) {
  if (!header.is_object()) return Bad(source, "the header is not a JSON object");
  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) return Bad(source, "__metadata__ is not a JSON object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string()) {
          return Bad(source, baton::StrCat("__metadata__ ", Quote(m.key()), " is not a string"));
        }
        (*metadata)[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (tensors->size() == limits.max_tensors) {
      return Bad(source, baton::StrCat("the header lists more than ", limits.max_tensors,
                                       " tensors; the limit is ", limits.max_tensors));
    }
    SafetensorsTensor t;
    Span span;
    BATON_RETURN_IF_ERROR(
        ParseTensor(it.key(), it.value(), data, data_start, limits, source, &t, &span));
    span.tensor = tensors->size();
    tensors->push_back(std::move(t));
    if (span.end > span.begin) spans.push_back(span);
  }
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].begin < spans[i - 1].end) {
      return Bad(source, baton::StrCat("tensors ", Quote((*tensors)[spans[i - 1].tensor].name),
                                       " and ", Quote((*tensors)[spans[i].tensor].name),
                                       " overlap in the data section"));
    }
  }
  return absl::OkStatus();
}

// A plain file name in the same directory: nothing that could reach another directory.
bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\\\0", 3)) == std::string::npos;
}

}  // namespace

absl::StatusOr<SafetensorsFile> SafetensorsFile::Parse(std::string_view bytes,
                                                       std::string_view source,
                                                       const SafetensorsLimits& limits) {
  if (bytes.size() < 8) {
    return Bad(source, baton::StrCat("file is ", bytes.size(),
                                     " bytes, too short for the 8-byte header length"));
  }
  uint64_t header_len;
  std::memcpy(&header_len, bytes.data(), 8);  // little-endian, as the format and x86
  if (header_len > limits.max_header_bytes) {
    return Bad(source, baton::StrCat("header length ", header_len, " exceeds the limit (",
                                     limits.max_header_bytes, " bytes): not a safetensors file?"));
  }
  if (header_len > bytes.size() - 8) {
    return Bad(source, baton::StrCat("header length ", header_len, " exceeds the ",
                                     bytes.size() - 8, " bytes after it (truncated file?)"));
  }
  if (header_len < 2) return Bad(source, baton::StrCat("header length ", header_len, " is empty"));
  const std::string_view text = bytes.substr(8, header_len);
  const uint64_t data_start = 8 + header_len;
  const std::string_view data = bytes.substr(data_start);

  json header = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) return Bad(source, "the header is not valid JSON");
  SafetensorsFile file;
  try {
    BATON_RETURN_IF_ERROR(
        ParseHeader(header, data, data_start, limits, source, &file.tensors_, &file.metadata_));
  } catch (const json::exception& e) {
    return Bad(source, baton::StrCat("malformed header: ", e.what()));
  }
  file.index_.reserve(file.tensors_.size());
  for (size_t i = 0; i < file.tensors_.size(); ++i) file.index_.emplace(file.tensors_[i].name, i);
  return file;
}

const SafetensorsTensor* SafetensorsFile::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<SafetensorsIndex> ParseSafetensorsIndex(std::string_view json_text,
                                                       std::string_view source) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return Bad(source, "not a JSON object (expected model.safetensors.index.json)");
  }
  if (!root.contains("weight_map") || !root["weight_map"].is_object()) {
    return Bad(source, "'weight_map' is missing or not an object of tensor name -> file name");
  }
  SafetensorsIndex index;
  std::set<std::string> shards;
  for (auto it = root["weight_map"].begin(); it != root["weight_map"].end(); ++it) {
    if (!it.value().is_string()) {
      return Bad(source, baton::StrCat("weight_map[", Quote(it.key()), "] is not a string"));
    }
    const std::string& shard = it.value().get_ref<const std::string&>();
    if (!IsPlainFileName(shard)) {
      return Bad(source, baton::StrCat("weight_map[", Quote(it.key()), "] = ", Quote(shard),
                                       " is not a plain file name in the model directory"));
    }
    index.weight_map.emplace(it.key(), shard);
    shards.insert(shard);
    if (shards.size() > kMaxSafetensorsShards) {
      return Bad(source, baton::StrCat("weight_map names more than ", kMaxSafetensorsShards,
                                       " shard files"));
    }
  }
  if (index.weight_map.empty()) return Bad(source, "weight_map is empty");
  index.shards.assign(shards.begin(), shards.end());
  return index;
}

const char* SafetensorsDTypeName(cpu::DType dtype) {
  switch (dtype) {
    case cpu::DType::kF32:
      return "F32";
    case cpu::DType::kF16:
      return "F16";
    case cpu::DType::kBF16:
      return "BF16";
    default:
      break;  // GGUF's block-quantized types
  }
  return "?";
}

}  // namespace baton::model
