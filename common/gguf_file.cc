#include "common/gguf_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <algorithm>
#include <bit>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status.h"

namespace baton::gguf {

// Values are memcpy'd straight out of the file; a big-endian host would need swaps.
static_assert(std::endian::native == std::endian::little, "gguf reader assumes little-endian");

namespace {

// The format allows arrays of arrays; a bound on depth keeps the validating pass linear
// and its recursion shallow.
constexpr int kMaxArrayDepth = 2;
constexpr uint64_t kMaxInt64 = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
// Smallest encodings, used to bound counts by the bytes left before anything is allocated.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;              // key length, type, a 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset
constexpr uint64_t kMinArrayBytes = 4 + 8;               // element type, count

uint64_t ScalarSize(ValueType type) {
  switch (type) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool:
      return 1;
    case ValueType::kUint16:
    case ValueType::kInt16:
      return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32:
      return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64:
      return 8;
    default:
      return 0;
  }
}

bool IsKnown(ValueType type) { return static_cast<uint32_t>(type) <= 12; }

bool IsInteger(ValueType type) {
  switch (type) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kUint16:
    case ValueType::kInt16:
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kUint64:
    case ValueType::kInt64:
      return true;
    default:
      return false;
  }
}

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// An integer of any width, kept in whichever of int64/uint64 holds it exactly.
struct Integer {
  bool is_signed;
  int64_t s;
  uint64_t u;
};

Integer LoadInteger(ValueType type, const char* p) {
  switch (type) {
    case ValueType::kUint8:
      return {false, 0, Load<uint8_t>(p)};
    case ValueType::kInt8:
      return {true, Load<int8_t>(p), 0};
    case ValueType::kUint16:
      return {false, 0, Load<uint16_t>(p)};
    case ValueType::kInt16:
      return {true, Load<int16_t>(p), 0};
    case ValueType::kUint32:
      return {false, 0, Load<uint32_t>(p)};
    case ValueType::kInt32:
      return {true, Load<int32_t>(p), 0};
    case ValueType::kUint64:
      return {false, 0, Load<uint64_t>(p)};
    default:
      return {true, Load<int64_t>(p), 0};
  }
}

// Debian's Abseil has its own string_view type, which StrCat does not take from std's.
absl::string_view Av(std::string_view s) { return {s.data(), s.size()}; }

// Keys and names in messages come from the file: escape them and cap their length.
std::string Quote(std::string_view s) {
  constexpr size_t kMax = 64;
  return absl::StrCat("'", absl::CHexEscape(Av(s.substr(0, kMax))), s.size() > kMax ? "'..." : "'");
}

std::string TypeLabel(ValueType type) {
  std::string_view name = ValueTypeName(type);
  if (name != "unknown") return std::string(name);
  return absl::StrCat("unknown (", static_cast<uint32_t>(type), ")");
}

absl::Status Invalid(std::string_view where, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("gguf: ", Av(where), ": ", Av(what)));
}

// A cursor over the file. `where` names the field being read, for the error message.
class Reader {
 public:
  Reader(std::string_view bytes, const Limits& limits) : bytes_(bytes), limits_(limits) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return bytes_.size() - pos_; }
  std::string_view Slice(uint64_t from) const { return bytes_.substr(from, pos_ - from); }

  absl::Status Need(uint64_t n, std::string_view where, std::string_view field) const {
    if (n <= left()) return absl::OkStatus();
    return Invalid(where, absl::StrCat(Av(field), " needs ", n, " bytes but the file has ", left(),
                                       " left (truncated?)"));
  }

  template <typename T>
  absl::Status Read(T* out, std::string_view where, std::string_view field) {
    BATON_RETURN_IF_ERROR(Need(sizeof(T), where, field));
    *out = Load<T>(bytes_.data() + pos_);
    pos_ += sizeof(T);
    return absl::OkStatus();
  }

  // A gguf string: uint64 length, then the bytes (not NUL-terminated, not checked as UTF-8).
  absl::Status ReadString(std::string_view* out, std::string_view where, std::string_view field) {
    uint64_t len;
    BATON_RETURN_IF_ERROR(Read(&len, where, absl::StrCat(Av(field), " length")));
    if (len > left()) {
      return Invalid(where, absl::StrCat(Av(field), " length ", len,
                                         " exceeds the bytes left in the file (", left(), ")"));
    }
    if (len > limits_.max_string_bytes) {
      return Invalid(where, absl::StrCat(Av(field), " length ", len, " exceeds the limit (",
                                         limits_.max_string_bytes, " bytes)"));
    }
    *out = bytes_.substr(pos_, len);
    pos_ += len;
    return absl::OkStatus();
  }

  // Reads element type and count, then walks the elements once to validate and skip them.
  absl::Status ReadArray(int depth, std::string_view where, File::Entry* out) {
    uint32_t raw_type;
    BATON_RETURN_IF_ERROR(Read(&raw_type, where, "array element type"));
    const auto type = static_cast<ValueType>(raw_type);
    if (!IsKnown(type)) {
      return Invalid(where, absl::StrCat("unknown array element type ", raw_type));
    }
    if (type == ValueType::kArray && depth >= kMaxArrayDepth) {
      return Invalid(where, absl::StrCat("arrays nested more than ", kMaxArrayDepth,
                                         " deep are not supported"));
    }
    uint64_t count;
    BATON_RETURN_IF_ERROR(Read(&count, where, "array length"));
    const uint64_t min_elem = type == ValueType::kString  ? 8
                              : type == ValueType::kArray ? kMinArrayBytes
                                                          : ScalarSize(type);
    if (count > left() / min_elem) {
      return Invalid(where, absl::StrCat("array length ", count,
                                         " exceeds the bytes left in the file (", left(), ")"));
    }
    if (count > limits_.max_array_len) {
      return Invalid(where, absl::StrCat("array length ", count, " exceeds the limit (",
                                         limits_.max_array_len, ")"));
    }
    const uint64_t start = pos_;
    if (type == ValueType::kString) {
      std::string_view s;
      for (uint64_t i = 0; i < count; ++i) {
        const uint64_t at = pos_;
        if (!ReadString(&s, where, "string").ok()) {
          // Rare path: read it again to name the element without a per-element StrCat.
          pos_ = at;
          return ReadString(&s, absl::StrCat(Av(where), ": element #", i), "string");
        }
      }
    } else if (type == ValueType::kArray) {
      File::Entry nested;
      for (uint64_t i = 0; i < count; ++i) {
        BATON_RETURN_IF_ERROR(
            ReadArray(depth + 1, absl::StrCat(Av(where), ": element #", i), &nested));
      }
    } else {
      pos_ += count * min_elem;  // count <= left / min_elem, so this stays in the file
    }
    out->type = ValueType::kArray;
    out->elem_type = type;
    out->count = count;
    out->data = Slice(start);
    return absl::OkStatus();
  }

  absl::Status ReadValue(ValueType type, std::string_view where, File::Entry* out) {
    if (type == ValueType::kArray) return ReadArray(1, where, out);
    out->type = type;
    out->elem_type = type;
    out->count = 0;
    if (type == ValueType::kString) return ReadString(&out->data, where, "string");
    const uint64_t size = ScalarSize(type);
    if (size == 0) {
      return Invalid(where, absl::StrCat("unknown value type ", static_cast<uint32_t>(type)));
    }
    BATON_RETURN_IF_ERROR(Need(size, where, absl::StrCat(Av(ValueTypeName(type)), " value")));
    out->data = bytes_.substr(pos_, size);
    pos_ += size;
    if (type == ValueType::kBool && static_cast<uint8_t>(out->data[0]) > 1) {
      return Invalid(where, absl::StrCat("bool value ", static_cast<uint8_t>(out->data[0]),
                                         " is neither 0 nor 1"));
    }
    return absl::OkStatus();
  }

  // One tensor info: name, dims, type, offset. Placement is checked once alignment is known.
  absl::Status ReadTensorInfo(uint64_t i, TensorInfo* t, std::string* where) {
    BATON_RETURN_IF_ERROR(ReadString(&t->name, absl::StrCat("tensor #", i), "name"));
    *where = absl::StrCat("tensor #", i, " (", Quote(t->name), ")");
    uint32_t n_dims;
    BATON_RETURN_IF_ERROR(Read(&n_dims, *where, "n_dims"));
    if (n_dims > limits_.max_dims) {
      return Invalid(
          *where, absl::StrCat("n_dims ", n_dims, " exceeds the limit (", limits_.max_dims, ")"));
    }
    BATON_RETURN_IF_ERROR(Need(uint64_t{8} * n_dims, *where, "dims"));
    t->dims.resize(n_dims);
    uint64_t elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      BATON_RETURN_IF_ERROR(Read(&t->dims[d], *where, "dim"));
      // ggml holds dims and element counts in int64.
      if (t->dims[d] > kMaxInt64 || (t->dims[d] != 0 && elems > kMaxInt64 / t->dims[d])) {
        return Invalid(*where,
                       absl::StrCat("dims overflow int64 at dim ", d, " (", t->dims[d], ")"));
      }
      elems *= t->dims[d];
    }
    BATON_RETURN_IF_ERROR(Read(&t->type, *where, "type"));
    uint64_t block_elems, block_bytes;
    if (!GgmlTypeGeometry(t->type, &block_elems, &block_bytes)) {
      return Invalid(*where, absl::StrCat("unknown ggml tensor type ", t->type));
    }
    const uint64_t row = n_dims == 0 ? 1 : t->dims[0];
    if (row % block_elems != 0) {
      return Invalid(*where, absl::StrCat("dim 0 (", row, ") is not a multiple of the block size (",
                                          block_elems, ") of ggml type ", t->type));
    }
    if (__builtin_mul_overflow(elems / block_elems, block_bytes, &t->nbytes)) {
      return Invalid(*where, "data size overflows uint64");
    }
    BATON_RETURN_IF_ERROR(Read(&t->offset, *where, "offset"));
    return absl::OkStatus();
  }

 private:
  std::string_view bytes_;
  const Limits& limits_;
  uint64_t pos_ = 0;
};

absl::Status CheckVersion(uint32_t version) {
  if (version == 2 || version == 3) return absl::OkStatus();
  if (version == 1) {
    return absl::InvalidArgumentError(
        "gguf: version 1 files are not supported (32-bit counts, obsolete since 2023); "
        "re-convert the model with a current llama.cpp");
  }
  if (__builtin_bswap32(version) == 2 || __builtin_bswap32(version) == 3) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: version field reads ", version,
                                                   ": a big-endian file, which is not supported"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("gguf: unsupported version ", version, " (supported: 2 and 3)"));
}

std::string TensorWhere(size_t i, const TensorInfo& t) {
  return absl::StrCat("tensor #", i, " (", Quote(t.name), ")");
}

// Each tensor must own its bytes. A corrupted type id can grow one tensor over the next,
// which would then read another tensor's bytes as its own and load into garbage.
// Empty tensors own no bytes and overlap nothing. In
// offset order, if any two tensors overlap then so do two neighbours (the earlier of an
// overlapping pair overlaps the tensor right after it), so sorting and one pass over
// neighbours find any overlap in O(n log n).
absl::Status CheckNoOverlap(const std::vector<TensorInfo>& tensors) {
  std::vector<size_t> order;
  order.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].nbytes != 0) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return tensors[a].offset != tensors[b].offset ? tensors[a].offset < tensors[b].offset : a < b;
  });
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorInfo& prev = tensors[order[k - 1]];
    // Parse checked offset + nbytes against the data section, so the sum cannot overflow.
    if (tensors[order[k]].offset >= prev.offset + prev.nbytes) continue;
    // Named in file order: the message is about the one listed later.
    const size_t i = std::min(order[k - 1], order[k]), j = std::max(order[k - 1], order[k]);
    const TensorInfo& a = tensors[i];
    const TensorInfo& b = tensors[j];
    return Invalid(TensorWhere(j, b),
                   absl::StrCat("data [", b.offset, ", +", b.nbytes, ") overlaps ",
                                TensorWhere(i, a), " data [", a.offset, ", +", a.nbytes, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view ValueTypeName(ValueType type) {
  static constexpr std::string_view kNames[] = {
      "uint8", "int8",   "uint16", "int16",  "uint32", "int32",   "float32",
      "bool",  "string", "array",  "uint64", "int64",  "float64",
  };
  const auto i = static_cast<uint32_t>(type);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

bool GgmlTypeGeometry(uint32_t type, uint64_t* block_elems, uint64_t* block_bytes) {
  struct Geometry {
    uint16_t elems, bytes;
  };
  // Indexed by ggml type id; {0, 0} marks ids that were removed (4, 5, 31-33, 36-38).
  static constexpr Geometry kTable[] = {
      {1, 4},     {1, 2},     {32, 18},   {32, 20},  {0, 0},     {0, 0},     {32, 22},
      {32, 24},   {32, 34},   {32, 36},   {256, 84}, {256, 110}, {256, 144}, {256, 176},
      {256, 210}, {256, 292}, {256, 66},  {256, 74}, {256, 98},  {256, 50},  {32, 18},
      {256, 110}, {256, 82},  {256, 136}, {1, 1},    {1, 2},     {1, 4},     {1, 8},
      {1, 8},     {256, 56},  {1, 2},     {0, 0},    {0, 0},     {0, 0},     {256, 54},
      {256, 66},  {0, 0},     {0, 0},     {0, 0},    {32, 17},   {64, 36},
  };
  if (type >= std::size(kTable) || kTable[type].elems == 0) return false;
  *block_elems = kTable[type].elems;
  *block_bytes = kTable[type].bytes;
  return true;
}

absl::StatusOr<File> File::Parse(std::string_view bytes, const Limits& limits) {
  Reader r(bytes, limits);
  File file;

  if (bytes.size() < 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf: file is ", bytes.size(), " bytes, too short for the magic"));
  }
  if (bytes.substr(0, 4) != "GGUF") {
    return absl::InvalidArgumentError(absl::StrCat("gguf: bad magic '",
                                                   absl::CHexEscape(Av(bytes.substr(0, 4))),
                                                   "' (expected 'GGUF'): not a GGUF file"));
  }
  uint32_t magic;
  BATON_RETURN_IF_ERROR(r.Read(&magic, "header", "magic"));
  BATON_RETURN_IF_ERROR(r.Read(&file.version_, "header", "version"));
  BATON_RETURN_IF_ERROR(CheckVersion(file.version_));
  uint64_t tensor_count, kv_count;
  BATON_RETURN_IF_ERROR(r.Read(&tensor_count, "header", "tensor count"));
  BATON_RETURN_IF_ERROR(r.Read(&kv_count, "header", "metadata count"));
  if (tensor_count > limits.max_tensors) {
    return Invalid("header", absl::StrCat("tensor count ", tensor_count, " exceeds the limit (",
                                          limits.max_tensors, ")"));
  }
  if (kv_count > limits.max_kv) {
    return Invalid("header", absl::StrCat("metadata count ", kv_count, " exceeds the limit (",
                                          limits.max_kv, ")"));
  }
  // Both sections must fit in what is left; checked before reserving space for either.
  if (kv_count > r.left() / kMinKvBytes ||
      tensor_count > (r.left() - kv_count * kMinKvBytes) / kMinTensorInfoBytes) {
    return Invalid("header",
                   absl::StrCat("metadata count ", kv_count, " and tensor count ", tensor_count,
                                " exceed the bytes left in the file (", r.left(), ")"));
  }

  file.entries_.reserve(kv_count);
  file.index_.reserve(kv_count);
  for (uint64_t i = 0; i < kv_count; ++i) {
    Entry entry;
    BATON_RETURN_IF_ERROR(r.ReadString(&entry.key, absl::StrCat("metadata key #", i), "key"));
    const std::string where = absl::StrCat("metadata key #", i, " (", Quote(entry.key), ")");
    uint32_t type;
    BATON_RETURN_IF_ERROR(r.Read(&type, where, "value type"));
    BATON_RETURN_IF_ERROR(r.ReadValue(static_cast<ValueType>(type), where, &entry));
    auto [it, inserted] = file.index_.emplace(entry.key, file.entries_.size());
    if (!inserted) {
      return Invalid(where,
                     absl::StrCat("duplicate key (first seen as metadata key #", it->second, ")"));
    }
    file.entries_.push_back(entry);
  }

  if (file.Has("general.alignment")) {
    absl::StatusOr<uint64_t> alignment = file.GetUint("general.alignment");
    if (!alignment.ok()) return alignment.status();
    if (*alignment == 0 || !std::has_single_bit(*alignment)) {
      return Invalid("general.alignment",
                     absl::StrCat("alignment ", *alignment, " is not a power of two"));
    }
    file.alignment_ = *alignment;
  }

  file.tensors_.reserve(tensor_count);
  file.tensor_index_.reserve(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    TensorInfo t;
    std::string where;
    BATON_RETURN_IF_ERROR(r.ReadTensorInfo(i, &t, &where));
    auto [it, inserted] = file.tensor_index_.emplace(t.name, file.tensors_.size());
    if (!inserted) {
      return Invalid(
          where, absl::StrCat("duplicate tensor name (first seen as tensor #", it->second, ")"));
    }
    file.tensors_.push_back(std::move(t));
  }

  // Round up to the alignment; pos <= size, and size + alignment cannot realistically
  // overflow, but a 2^63 alignment from a crafted file could, so check.
  const uint64_t pos = r.pos();
  const uint64_t pad = (file.alignment_ - pos % file.alignment_) % file.alignment_;
  if (pad > std::numeric_limits<uint64_t>::max() - pos) {
    return Invalid("general.alignment",
                   absl::StrCat("alignment ", file.alignment_, " puts the data section past 2^64"));
  }
  file.data_offset_ = pos + pad;

  if (!file.tensors_.empty() && file.data_offset_ > bytes.size()) {
    return Invalid("data section", absl::StrCat("starts at ", file.data_offset_,
                                                ", past the end of the file (", bytes.size(), ")"));
  }
  const uint64_t data_size = bytes.size() - std::min<uint64_t>(file.data_offset_, bytes.size());
  for (size_t i = 0; i < file.tensors_.size(); ++i) {
    const TensorInfo& t = file.tensors_[i];
    if (t.offset % file.alignment_ != 0) {
      return Invalid(TensorWhere(i, t),
                     absl::StrCat("offset ", t.offset, " is not a multiple of the alignment (",
                                  file.alignment_, ")"));
    }
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      return Invalid(TensorWhere(i, t),
                     absl::StrCat("data [", t.offset, ", +", t.nbytes,
                                  ") lies outside the data section (", data_size, " bytes)"));
    }
  }
  BATON_RETURN_IF_ERROR(CheckNoOverlap(file.tensors_));
  return file;
}

ValueType File::TypeOf(std::string_view key) const {
  auto it = index_.find(key);
  BATON_CHECK(it != index_.end());  // a caller bug: the precondition is Has(key)
  return entries_[it->second].type;
}

absl::StatusOr<const File::Entry*> File::Find(std::string_view key) const {
  auto it = index_.find(key);
  if (it == index_.end()) {
    return absl::NotFoundError(absl::StrCat("gguf: key ", Quote(key), " not found"));
  }
  return &entries_[it->second];
}

namespace {

absl::Status WrongType(const File::Entry& e, std::string_view wanted) {
  std::string have = TypeLabel(e.type);
  if (e.type == ValueType::kArray) have = absl::StrCat("array of ", TypeLabel(e.elem_type));
  return absl::InvalidArgumentError(
      absl::StrCat("gguf: key ", Quote(e.key), " has type ", have, ", expected ", Av(wanted)));
}

absl::StatusOr<const File::Entry*> ExpectArray(absl::StatusOr<const File::Entry*> found,
                                               bool (*elem_ok)(ValueType),
                                               std::string_view wanted) {
  if (!found.ok()) return found;
  const File::Entry* e = *found;
  if (e->type != ValueType::kArray || !elem_ok(e->elem_type)) return WrongType(*e, wanted);
  return e;
}

}  // namespace

absl::StatusOr<ValueType> File::ArrayElementType(std::string_view key) const {
  BATON_ASSIGN_OR_RETURN(const Entry* e, Find(key));
  if (e->type != ValueType::kArray) return WrongType(*e, "an array");
  return e->elem_type;
}

absl::StatusOr<uint64_t> File::ArrayLength(std::string_view key) const {
  BATON_ASSIGN_OR_RETURN(const Entry* e, Find(key));
  if (e->type != ValueType::kArray) return WrongType(*e, "an array");
  return e->count;
}

absl::StatusOr<std::string_view> File::GetString(std::string_view key) const {
  BATON_ASSIGN_OR_RETURN(const Entry* e, Find(key));
  if (e->type != ValueType::kString) return WrongType(*e, "string");
  return e->data;
}

absl::StatusOr<uint64_t> File::GetUint(std::string_view key) const {
  BATON_ASSIGN_OR_RETURN(const Entry* e, Find(key));
  if (!IsInteger(e->type)) return WrongType(*e, "an integer");
  const Integer v = LoadInteger(e->type, e->data.data());
  if (!v.is_signed) return v.u;
  if (v.s < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf: key ", Quote(key), ": value ", v.s, " is negative"));
  }
  return static_cast<uint64_t>(v.s);
}

absl::StatusOr<int64_t> File::GetInt(std::string_view key) const {
  BATON_ASSIGN_OR_RETURN(const Entry* e, Find(key));
  if (!IsInteger(e->type)) return WrongType(*e, "an integer");
  const Integer v = LoadInteger(e->type, e->data.data());
  if (v.is_signed) return v.s;
  if (v.u > kMaxInt64) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf: key ", Quote(key), ": value ", v.u, " does not fit in int64"));
  }
  return static_cast<int64_t>(v.u);
}

absl::StatusOr<double> File::GetFloat(std::string_view key) const {
  BATON_ASSIGN_OR_RETURN(const Entry* e, Find(key));
  if (e->type == ValueType::kFloat32) return Load<float>(e->data.data());
  if (e->type == ValueType::kFloat64) return Load<double>(e->data.data());
  if (!IsInteger(e->type)) return WrongType(*e, "a number");
  const Integer v = LoadInteger(e->type, e->data.data());
  return v.is_signed ? static_cast<double>(v.s) : static_cast<double>(v.u);
}

absl::StatusOr<bool> File::GetBool(std::string_view key) const {
  BATON_ASSIGN_OR_RETURN(const Entry* e, Find(key));
  if (e->type != ValueType::kBool) return WrongType(*e, "bool");
  return e->data[0] != 0;
}

absl::StatusOr<std::vector<std::string_view>> File::GetStringArray(std::string_view key) const {
  BATON_ASSIGN_OR_RETURN(
      const Entry* e,
      ExpectArray(
          Find(key), [](ValueType t) { return t == ValueType::kString; }, "array of string"));
  // Parse already checked every length, so this pass only slices.
  std::vector<std::string_view> out;
  out.reserve(e->count);
  size_t pos = 0;
  for (uint64_t i = 0; i < e->count; ++i) {
    const uint64_t len = Load<uint64_t>(e->data.data() + pos);
    out.push_back(e->data.substr(pos + 8, len));
    pos += 8 + len;
  }
  return out;
}

absl::StatusOr<std::vector<float>> File::GetFloatArray(std::string_view key) const {
  BATON_ASSIGN_OR_RETURN(
      const Entry* e,
      ExpectArray(
          Find(key), [](ValueType t) { return t == ValueType::kFloat32; }, "array of float32"));
  std::vector<float> out(e->count);
  if (e->count != 0) std::memcpy(out.data(), e->data.data(), e->count * sizeof(float));
  return out;
}

absl::StatusOr<std::vector<int64_t>> File::GetIntArray(std::string_view key) const {
  BATON_ASSIGN_OR_RETURN(const Entry* e, ExpectArray(Find(key), IsInteger, "array of integers"));
  const uint64_t size = ScalarSize(e->elem_type);
  std::vector<int64_t> out(e->count);
  for (uint64_t i = 0; i < e->count; ++i) {
    const Integer v = LoadInteger(e->elem_type, e->data.data() + i * size);
    if (!v.is_signed && v.u > kMaxInt64) {
      return absl::InvalidArgumentError(absl::StrCat("gguf: key ", Quote(key), ": element #", i,
                                                     " (", v.u, ") does not fit in int64"));
    }
    out[i] = v.is_signed ? v.s : static_cast<int64_t>(v.u);
  }
  return out;
}

std::vector<std::string_view> File::Keys() const {
  std::vector<std::string_view> keys;
  keys.reserve(entries_.size());
  for (const Entry& e : entries_) keys.push_back(e.key);
  return keys;
}

const TensorInfo* File::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

bool LooksLikeGgufFile(const std::string& path) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0) return true;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, sizeof(magic));
  return in.gcount() == 4 && std::string_view(magic, 4) == "GGUF";
}

std::vector<std::string> GgufFilesIn(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".gguf") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace baton::gguf
