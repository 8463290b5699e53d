#include "model/gguf_loader.h"

#include <iterator>
#include <string>

#include "common/gguf_file.h"
#include "common/status.h"
#include "common/strings.h"
#include "model/gguf_config.h"

namespace baton::model {
std::optional<cpu::DType> DTypeOfGgmlType(uint32_t ggml_type) {
  switch (ggml_type) {
    case 0:
      return cpu::DType::kF32;
    case 1:
      return cpu::DType::kF16;
    case 2:
      return cpu::DType::kQ4_0;
    case 3:
      return cpu::DType::kQ4_1;
    case 6:
      return cpu::DType::kQ5_0;
    case 7:
      return cpu::DType::kQ5_1;
    case 8:
      return cpu::DType::kQ8_0;
    case 10:
      return cpu::DType::kQ2_K;
    case 11:
      return cpu::DType::kQ3_K;
    case 12:
      return cpu::DType::kQ4_K;
    case 13:
      return cpu::DType::kQ5_K;
    case 14:
      return cpu::DType::kQ6_K;
    case 30:
      return cpu::DType::kBF16;
    default:
      return std::nullopt;
  }
}

std::string GgmlTypeName(uint32_t type) {
  // ggml's type names by id; empty for ids that were removed.
  static constexpr const char* kNames[] = {
      "f32",     "f16",    "q4_0",    "q4_1",  "",       "",      "q5_0",  "q5_1",
      "q8_0",    "q8_1",   "q2_K",    "q3_K",  "q4_K",   "q5_K",  "q6_K",  "q8_K",
      "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs",
      "i8",      "i16",    "i32",     "i64",   "f64",    "iq1_m", "bf16",  "",
      "",        "",       "tq1_0",   "tq2_0", "",       "",      "",      "mxfp4"};
  if (type < std::size(kNames) && kNames[type][0] != '\0') {
    return baton::StrCat(kNames[type], " (", type, ")");
  }
  return baton::StrCat("type ", type);
}

absl::StatusOr<ModelParts> LoadGgufModel(std::string_view bytes, std::string_view source) {
  absl::StatusOr<gguf::File> file = gguf::File::Parse(bytes);
  if (!file.ok()) {
    return absl::InvalidArgumentError(baton::StrCat(source, ": ", file.status().message()));
  }
  ModelParts parts;
  BATON_ASSIGN_OR_RETURN(parts.config, ConfigFromGguf(*file, source));

  TensorTable table;
  table.reserve(file->tensors().size());
  for (const gguf::TensorInfo& t : file->tensors()) {
    TensorEntry e;
    e.dtype = DTypeOfGgmlType(t.type);
    e.type_name = GgmlTypeName(t.type);
    // ggml lists dims innermost first; rows/cols are outermost first.
    for (auto d = t.dims.rbegin(); d != t.dims.rend(); ++d)
      e.shape.push_back(static_cast<int64_t>(*d));
    // gguf::File::Parse checked that [data_offset + offset, + nbytes) lies in `bytes`.
    e.data = bytes.substr(file->data_offset() + t.offset, t.nbytes);
    e.file = source;
    table.emplace(std::string(t.name), std::move(e));
  }
  BATON_ASSIGN_OR_RETURN(
      parts.weights, BindWeights(&parts.config, table, TensorNaming::kGguf, &parts.weight_bytes));
  parts.generation.eos_token_ids = parts.config.eos_token_ids;
  return parts;
}

}  // namespace baton::model
