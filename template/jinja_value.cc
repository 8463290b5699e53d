#include "template/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/status/status.h"
#include "common/status.h"
#include "common/strings.h"
#include "template/jinja_strings.h"

namespace baton::templating::jinja {
namespace {

thread_local std::vector<std::shared_ptr<HeapData>>* t_pending_release = nullptr;

absl::Status NestingError() {
  return absl::InvalidArgumentError(
      StrCat("value nesting exceeds ", kMaxValueDepth, " levels (a cyclic structure?)"));
}

// Collation rank of ASCII characters in the CLDR root order that localeCompare() uses:
// whitespace and punctuation, then symbols, then digits, then letters (case-insensitive
// at this level).
int CollationRank(unsigned char c) {
  static constexpr std::string_view kOrder =
      "\t\n\v\f\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789";
  if (c >= 'A' && c <= 'Z') c = static_cast<unsigned char>(c + 32);
  if (c >= 'a' && c <= 'z') return 200 + (c - 'a');
  size_t pos = kOrder.find(static_cast<char>(c));
  if (pos != std::string_view::npos) return static_cast<int>(pos);
  return 300 + c;  // non-ASCII bytes: after ASCII letters, in byte order
}

// An approximation of String.prototype.localeCompare() for ASCII keys: primary order
// by CollationRank, then lowercase before uppercase.
bool LocaleLess(const std::string& a, const std::string& b) {
  size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    int ra = CollationRank(static_cast<unsigned char>(a[i]));
    int rb = CollationRank(static_cast<unsigned char>(b[i]));
    if (ra != rb) return ra < rb;
  }
  if (a.size() != b.size()) return a.size() < b.size();
  for (size_t i = 0; i < n; ++i) {
    bool la = a[i] >= 'a' && a[i] <= 'z', lb = b[i] >= 'a' && b[i] <= 'z';
    if (la != lb) return la;
  }
  return false;
}

// A value as JavaScript's abstract equality sees it.
struct JsPrimitive {
  enum Type { kUndefined, kNull, kBool, kNumber, kString, kObject } type = kUndefined;
  double number = 0;
  std::string string;
  const void* identity = nullptr;
};

JsPrimitive ToJsPrimitive(const Value& v) {
  JsPrimitive p;
  switch (v.kind()) {
    case ValueKind::kUndefined:
      p.type = JsPrimitive::kUndefined;
      break;
    case ValueKind::kNull:
      p.type = JsPrimitive::kNull;
      break;
    case ValueKind::kBool:
      p.type = JsPrimitive::kBool;
      break;
    case ValueKind::kInteger:
    case ValueKind::kFloat:
      p.type = JsPrimitive::kNumber;
      break;
    case ValueKind::kString:
      p.type = JsPrimitive::kString;
      p.string = v.str();
      break;
    default:
      p.type = JsPrimitive::kObject;
      p.identity = v.identity();
  }
  p.number = v.number();
  return p;
}

bool StrictPrimitiveEquals(const JsPrimitive& a, const JsPrimitive& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case JsPrimitive::kUndefined:
    case JsPrimitive::kNull:
      return true;
    case JsPrimitive::kBool:
    case JsPrimitive::kNumber:
      return a.number == b.number;
    case JsPrimitive::kString:
      return a.string == b.string;
    case JsPrimitive::kObject:
      return a.identity == b.identity;
  }
  return false;
}

}  // namespace

std::string_view KindName(ValueKind kind) {
  switch (kind) {
    case ValueKind::kUndefined:
      return "UndefinedValue";
    case ValueKind::kNull:
      return "NullValue";
    case ValueKind::kBool:
      return "BooleanValue";
    case ValueKind::kInteger:
      return "IntegerValue";
    case ValueKind::kFloat:
      return "FloatValue";
    case ValueKind::kString:
      return "StringValue";
    case ValueKind::kArray:
      return "ArrayValue";
    case ValueKind::kTuple:
      return "TupleValue";
    case ValueKind::kObject:
      return "ObjectValue";
    case ValueKind::kKwargs:
      return "KeywordArgumentsValue";
    case ValueKind::kNamespace:
      return "NamespaceValue";
    case ValueKind::kFunction:
      return "FunctionValue";
  }
  return "Value";
}

ArrayData::ArrayData(std::vector<Value> v) : items(std::move(v)) {}
ArrayData::~ArrayData() { ReleaseDeferred(&items); }

ObjectData::~ObjectData() { Clear(); }

void ObjectData::Clear() {
  std::vector<Value> values;
  values.reserve(entries_.size());
  for (auto& entry : entries_) values.push_back(std::move(entry.second));
  entries_.clear();
  index_.clear();
  ReleaseDeferred(&values);
}

ptrdiff_t ObjectData::Position(std::string_view key) const {
  if (entries_.size() <= kIndexThreshold) {
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].first == key) return static_cast<ptrdiff_t>(i);
    }
    return -1;
  }
  auto it = index_.find(Av(key));
  return it == index_.end() ? -1 : static_cast<ptrdiff_t>(it->second);
}

void ObjectData::Reindex() {
  index_.clear();
  if (entries_.size() <= kIndexThreshold) return;
  for (size_t i = 0; i < entries_.size(); ++i) index_.try_emplace(entries_[i].first, i);
}

const Value* ObjectData::Find(std::string_view key) const {
  ptrdiff_t pos = Position(key);
  return pos < 0 ? nullptr : &entries_[static_cast<size_t>(pos)].second;
}

void ObjectData::Set(std::string_view key, Value value) {
  ptrdiff_t pos = Position(key);
  if (pos >= 0) {
    entries_[static_cast<size_t>(pos)].second = std::move(value);
    return;
  }
  entries_.emplace_back(std::string(key), std::move(value));
  if (entries_.size() == kIndexThreshold + 1) {
    Reindex();
  } else if (entries_.size() > kIndexThreshold + 1) {
    index_.try_emplace(entries_.back().first, entries_.size() - 1);
  }
}

bool ObjectData::Erase(std::string_view key) {
  ptrdiff_t pos = Position(key);
  if (pos < 0) return false;
  entries_.erase(entries_.begin() + pos);
  Reindex();
  return true;
}

void ReleaseDeferred(std::vector<Value>* values) {
  if (t_pending_release != nullptr) {
    for (Value& v : *values) {
      if (v.heap_) t_pending_release->push_back(std::move(v.heap_));
    }
    values->clear();
    return;
  }
  std::vector<std::shared_ptr<HeapData>> pending;
  t_pending_release = &pending;
  for (Value& v : *values) {
    if (v.heap_) pending.push_back(std::move(v.heap_));
  }
  values->clear();
  while (!pending.empty()) {
    std::shared_ptr<HeapData> last = std::move(pending.back());
    pending.pop_back();
    last.reset();  // may append this value's children to `pending`
  }
  t_pending_release = nullptr;
}

Value Value::Number(double n) {
  return std::isfinite(n) && std::trunc(n) == n ? Integer(n) : Float(n);
}

Value Value::String(std::string s) {
  Value v(ValueKind::kString);
  v.heap_ = std::make_shared<StringData>(std::move(s));
  return v;
}

Value Value::Array(std::vector<Value> items) {
  Value v(ValueKind::kArray);
  v.heap_ = std::make_shared<ArrayData>(std::move(items));
  return v;
}

Value Value::Tuple(std::vector<Value> items) {
  Value v(ValueKind::kTuple);
  v.heap_ = std::make_shared<ArrayData>(std::move(items));
  return v;
}

Value Value::Object(std::shared_ptr<ObjectData> data, ValueKind kind) {
  Value v(kind);
  v.heap_ = std::move(data);
  return v;
}

Value Value::Function(std::shared_ptr<FunctionData> fn) {
  Value v(ValueKind::kFunction);
  v.heap_ = std::move(fn);
  return v;
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNull:
      return false;
    case ValueKind::kBool:
      return v.boolean();
    case ValueKind::kInteger:
    case ValueKind::kFloat:
      return v.number() != 0 && !std::isnan(v.number());
    case ValueKind::kString:
      return !v.str().empty();
    case ValueKind::kArray:
    case ValueKind::kTuple:
      return !v.array().items.empty();
    case ValueKind::kObject:
    case ValueKind::kKwargs:
      return v.object().size() > 0;
    case ValueKind::kNamespace:
    case ValueKind::kFunction:
      return true;
  }
  return false;
}

bool JsTruthy(const Value& v) {
  // JavaScript differs from Jinja only for containers: an empty array or object is true.
  switch (v.kind()) {
    case ValueKind::kArray:
    case ValueKind::kTuple:
    case ValueKind::kObject:
    case ValueKind::kKwargs:
      return true;
    default:
      return Truthy(v);
  }
}

absl::Status TooLong(size_t max_bytes) {
  return absl::InvalidArgumentError(
      StrCat("output exceeds max_output_bytes (", max_bytes, ") while converting a value to text"));
}

absl::StatusOr<std::string> ToDisplayString(const Value& v, size_t max_bytes) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return std::string("undefined");
    case ValueKind::kNull:
      return std::string("null");
    case ValueKind::kBool:
      return std::string(v.boolean() ? "true" : "false");
    case ValueKind::kInteger:
      return JsNumberToString(v.number());
    case ValueKind::kFloat:
      return JsFloatToString(v.number());
    case ValueKind::kString:
      return v.str();
    case ValueKind::kFunction:
      // JavaScript would print the function's source text; there is no faithful answer.
      return absl::InvalidArgumentError(
          StrCat("cannot render function '", v.function().name, "' as text"));
    default: {
      std::string out;
      JsonOptions options;
      options.max_bytes = max_bytes;
      BATON_RETURN_IF_ERROR(AppendJson(v, options, /*undefined_to_null=*/false, &out));
      if (out.size() > max_bytes) return TooLong(max_bytes);
      return out;
    }
  }
}

absl::StatusOr<std::string> ToJsString(const Value& v, size_t max_bytes) {
  switch (v.kind()) {
    case ValueKind::kFloat:
      return JsNumberToString(v.number());
    case ValueKind::kArray:
    case ValueKind::kTuple: {
      std::string out;
      bool first = true;
      for (const Value& item : v.array().items) {
        if (!first) out.push_back(',');
        first = false;
        BATON_ASSIGN_OR_RETURN(std::string s, ToDisplayString(item, max_bytes));
        out += s;
        if (out.size() > max_bytes) return TooLong(max_bytes);
      }
      return out;
    }
    case ValueKind::kObject:
    case ValueKind::kKwargs:
    case ValueKind::kNamespace:
      return std::string("[object Map]");
    default:
      return ToDisplayString(v, max_bytes);
  }
}

absl::Status AppendJson(const Value& v, const JsonOptions& options, bool undefined_to_null,
                        std::string* out, int depth) {
  if (depth > kMaxValueDepth) return NestingError();
  if (out->size() > options.max_bytes) {
    return absl::InvalidArgumentError(
        StrCat("tojson output exceeds max_output_bytes (", options.max_bytes, ")"));
  }
  switch (v.kind()) {
    case ValueKind::kNull:
      out->append("null");
      return absl::OkStatus();
    case ValueKind::kUndefined:
      out->append(undefined_to_null ? "null" : "undefined");
      return absl::OkStatus();
    case ValueKind::kBool:
      out->append(v.boolean() ? "true" : "false");
      return absl::OkStatus();
    case ValueKind::kInteger:
    case ValueKind::kFloat:
      out->append(std::isfinite(v.number()) ? JsNumberToString(v.number()) : "null");
      return absl::OkStatus();
    case ValueKind::kString:
      AppendJsonString(v.str(), options.ensure_ascii, out);
      return absl::OkStatus();
    case ValueKind::kArray:
    case ValueKind::kObject:
    case ValueKind::kNamespace:
      break;
    default:
      return absl::InvalidArgumentError(StrCat("Cannot convert to JSON: ", KindName(v.kind())));
  }
  const double indent_value = options.indent.value_or(0);
  const bool indent = indent_value != 0 && !std::isnan(indent_value);
  if (indent && (indent_value < 0 || indent_value > static_cast<double>(options.max_bytes) ||
                 !std::isfinite(indent_value))) {
    return absl::InvalidArgumentError(
        StrCat("tojson indent ", JsNumberToString(indent_value), " is out of range"));
  }
  std::string item_sep = ", ", key_sep = ": ";
  if (options.separators) {
    item_sep = options.separators->first;
    key_sep = options.separators->second;
  } else if (indent) {
    item_sep = ",";
  }
  std::string indent_unit = indent ? std::string(static_cast<size_t>(indent_value), ' ') : "";
  std::string base_padding = "\n", child_padding;
  if (indent) {
    if (indent_unit.size() * static_cast<size_t>(depth + 1) > options.max_bytes) {
      return absl::InvalidArgumentError(
          StrCat("tojson output exceeds max_output_bytes (", options.max_bytes, ")"));
    }
    for (int i = 0; i < depth; ++i) base_padding += indent_unit;
    child_padding = base_padding + indent_unit;
  }

  if (v.kind() == ValueKind::kArray) {
    const auto& items = v.array().items;
    out->push_back('[');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out->append(item_sep);
      if (indent) out->append(child_padding);
      BATON_RETURN_IF_ERROR(AppendJson(items[i], options, undefined_to_null, out, depth + 1));
    }
    if (indent && !items.empty()) out->append(base_padding);
    out->push_back(']');
    return absl::OkStatus();
  }

  std::vector<const std::pair<std::string, Value>*> entries;
  for (const auto& entry : v.object().entries()) entries.push_back(&entry);
  if (options.sort_keys) {
    std::stable_sort(entries.begin(), entries.end(),
                     [](const auto* a, const auto* b) { return LocaleLess(a->first, b->first); });
  }
  out->push_back('{');
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out->append(item_sep);
    if (indent) out->append(child_padding);
    AppendJsonString(entries[i]->first, options.ensure_ascii, out);
    out->append(key_sep);
    BATON_RETURN_IF_ERROR(
        AppendJson(entries[i]->second, options, undefined_to_null, out, depth + 1));
  }
  if (indent && !entries.empty()) out->append(base_padding);
  out->push_back('}');
  return absl::OkStatus();
}

absl::StatusOr<bool> LooseEquals(const Value& a, const Value& b, size_t max_bytes) {
  JsPrimitive x = ToJsPrimitive(a), y = ToJsPrimitive(b);
  // IsLooselyEqual from ECMA-262, applied until both sides have the same type.
  for (int step = 0; step < 4; ++step) {
    if (x.type == y.type) return StrictPrimitiveEquals(x, y);
    auto is_nullish = [](const JsPrimitive& p) {
      return p.type == JsPrimitive::kNull || p.type == JsPrimitive::kUndefined;
    };
    if (is_nullish(x) || is_nullish(y)) return is_nullish(x) && is_nullish(y);
    if (x.type == JsPrimitive::kBool) {
      x.type = JsPrimitive::kNumber;
      continue;
    }
    if (y.type == JsPrimitive::kBool) {
      y.type = JsPrimitive::kNumber;
      continue;
    }
    if (x.type == JsPrimitive::kNumber && y.type == JsPrimitive::kString) {
      return x.number == JsStringToNumber(y.string);
    }
    if (x.type == JsPrimitive::kString && y.type == JsPrimitive::kNumber) {
      return JsStringToNumber(x.string) == y.number;
    }
    // An object against a number or string: compare its primitive (string) form.
    JsPrimitive* obj = x.type == JsPrimitive::kObject ? &x : &y;
    const Value& source = x.type == JsPrimitive::kObject ? a : b;
    if (source.is(ValueKind::kFunction)) return false;
    BATON_ASSIGN_OR_RETURN(std::string s, ToJsString(source, max_bytes));
    obj->type = JsPrimitive::kString;
    obj->string = std::move(s);
  }
  return false;
}

bool StrictEquals(const Value& a, const Value& b) {
  return StrictPrimitiveEquals(ToJsPrimitive(a), ToJsPrimitive(b));
}

absl::StatusOr<int> CompareValues(const Value& a, const Value& b, bool case_sensitive) {
  auto error = [&](std::string_view what) {
    return absl::InvalidArgumentError(
        StrCat(what, KindName(a.kind()), " and ", KindName(b.kind())));
  };
  if (a.IsNull() && b.IsNull()) return 0;
  if (a.IsNull() || b.IsNull()) return error("Cannot compare ");
  if (a.IsUndefined() && b.IsUndefined()) return 0;
  if (a.IsUndefined() || b.IsUndefined()) return error("Cannot compare ");
  auto numeric = [](const Value& v) { return v.IsNumber() || v.is(ValueKind::kBool); };
  if (numeric(a) && numeric(b)) {
    double x = a.number(), y = b.number();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.kind() != b.kind()) return error("Cannot compare different types: ");
  if (!a.IsString()) {
    return absl::InvalidArgumentError(StrCat("Cannot compare type: ", KindName(a.kind())));
  }
  if (case_sensitive) return Utf16Compare(a.str(), b.str());
  return Utf16Compare(JsToLower(a.str()), JsToLower(b.str()));
}

namespace {

// A canonical array index ("0", "17"; not "01" or "-1"), which JavaScript objects list
// before all other keys.
bool IsArrayIndexKey(const std::string& key, double* index) {
  if (key.empty() || key.size() > 10) return false;
  if (key.size() > 1 && key[0] == '0') return false;
  for (char c : key) {
    if (c < '0' || c > '9') return false;
  }
  *index = std::strtod(key.c_str(), nullptr);
  return *index < 4294967295.0;
}

template <typename Json>
absl::StatusOr<Value> FromJsonAt(const Json& json, int depth) {
  if (depth > kMaxValueDepth) return NestingError();
  switch (json.type()) {
    case Json::value_t::null:
      return Value::Null();
    case Json::value_t::boolean:
      return Value::Bool(json.template get<bool>());
    case Json::value_t::number_integer:
      return Value::Number(static_cast<double>(json.template get<int64_t>()));
    case Json::value_t::number_unsigned:
      return Value::Number(static_cast<double>(json.template get<uint64_t>()));
    case Json::value_t::number_float:
      return Value::Number(json.template get<double>());
    case Json::value_t::string:
      return Value::String(json.template get_ref<const std::string&>());
    case Json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) {
        BATON_ASSIGN_OR_RETURN(Value v, FromJsonAt(item, depth + 1));
        items.push_back(std::move(v));
      }
      return Value::Array(std::move(items));
    }
    case Json::value_t::object: {
      std::vector<std::pair<double, const std::string*>> index_keys;
      std::vector<const std::string*> other_keys;
      for (auto it = json.begin(); it != json.end(); ++it) {
        double index = 0;
        if (IsArrayIndexKey(it.key(), &index)) {
          index_keys.emplace_back(index, &it.key());
        } else {
          other_keys.push_back(&it.key());
        }
      }
      std::sort(index_keys.begin(), index_keys.end());
      auto data = std::make_shared<ObjectData>();
      auto add = [&](const std::string& key) -> absl::Status {
        BATON_ASSIGN_OR_RETURN(Value v, FromJsonAt(json.at(key), depth + 1));
        data->Set(key, std::move(v));
        return absl::OkStatus();
      };
      for (const auto& [index, key] : index_keys) BATON_RETURN_IF_ERROR(add(*key));
      for (const std::string* key : other_keys) BATON_RETURN_IF_ERROR(add(*key));
      return Value::Object(std::move(data));
    }
    default:
      return absl::InvalidArgumentError("chat template context holds a value JSON cannot express");
  }
}

}  // namespace

absl::StatusOr<Value> FromJson(const nlohmann::json& json) { return FromJsonAt(json, 0); }

absl::StatusOr<Value> FromJson(const nlohmann::ordered_json& json) { return FromJsonAt(json, 0); }

Value AttributePath(const Value& item, std::string_view path) {
  Value value = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string_view part =
        path.substr(start, dot == std::string_view::npos ? path.npos : dot - start);
    if (value.IsAttributeContainer()) {
      const Value* found = value.object().Find(part);
      value = found != nullptr ? *found : Value();
    } else if (value.IsArrayLike()) {
      const double index = JsParseInt(part);
      const auto& items = value.array().items;
      if (std::isnan(index) || index < 0 || index >= static_cast<double>(items.size()))
        return Value();
      value = items[static_cast<size_t>(index)];
    } else {
      return Value();
    }
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return value;
}

std::string SameValueKey(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return "u";
    case ValueKind::kNull:
      return "n";
    case ValueKind::kBool:
      return v.boolean() ? "t" : "f";
    case ValueKind::kInteger:
    case ValueKind::kFloat:
      return StrCat("#", JsNumberToString(v.number()));
    case ValueKind::kString:
      return StrCat("s", v.str());
    default:
      return StrCat("o", reinterpret_cast<uintptr_t>(v.identity()));
  }
}

}  // namespace baton::templating::jinja
