// Runtime values of the Jinja evaluator, modelled on @huggingface/jinja's RuntimeValue
// classes: numbers are doubles (IntegerValue vs FloatValue only changes how they print),
// containers have reference identity (== on two lists compares identity, as in
// JavaScript), and objects keep insertion order.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace baton::templating::jinja {

class Interpreter;
class Env;

enum class ValueKind : uint8_t {
  kUndefined,
  kNull,
  kBool,
  kInteger,
  kFloat,
  kString,
  kArray,
  kTuple,  // an ArrayValue subclass in HF: array-like, but not serializable
  kObject,
  kKwargs,     // KeywordArgumentsValue: an ObjectValue subclass that marks keyword arguments
  kNamespace,  // mutable attribute bag from namespace()
  kFunction,
};

// The class name @huggingface/jinja would report ("IntegerValue", ...), for messages.
std::string_view KindName(ValueKind kind);

struct HeapData {
  virtual ~HeapData() = default;
};

class Value;
class ObjectData;
struct FunctionData;

struct ArrayData : HeapData {
  ArrayData() = default;
  explicit ArrayData(std::vector<Value> v);
  ~ArrayData() override;
  std::vector<Value> items;
};

class Value {
 public:
  Value() = default;  // undefined

  static Value Null() { return Value(ValueKind::kNull); }
  static Value Bool(bool b) {
    Value v(ValueKind::kBool);
    v.number_ = b ? 1 : 0;
    return v;
  }
  static Value Integer(double n) {
    Value v(ValueKind::kInteger);
    v.number_ = n;
    return v;
  }
  static Value Float(double n) {
    Value v(ValueKind::kFloat);
    v.number_ = n;
    return v;
  }
  // convertToRuntimeValues(): integral doubles become IntegerValue.
  static Value Number(double n);
  static Value String(std::string s);
  static Value Array(std::vector<Value> items);
  static Value Tuple(std::vector<Value> items);
  static Value Object(std::shared_ptr<ObjectData> data, ValueKind kind = ValueKind::kObject);
  static Value Function(std::shared_ptr<FunctionData> fn);

  ValueKind kind() const { return kind_; }
  bool is(ValueKind k) const { return kind_ == k; }
  bool IsUndefined() const { return kind_ == ValueKind::kUndefined; }
  bool IsNull() const { return kind_ == ValueKind::kNull; }
  bool IsString() const { return kind_ == ValueKind::kString; }
  bool IsNumber() const { return kind_ == ValueKind::kInteger || kind_ == ValueKind::kFloat; }
  // instanceof ArrayValue (tuples included).
  bool IsArrayLike() const { return kind_ == ValueKind::kArray || kind_ == ValueKind::kTuple; }
  // instanceof ObjectValue (keyword arguments included, namespaces not).
  bool IsObjectLike() const { return kind_ == ValueKind::kObject || kind_ == ValueKind::kKwargs; }
  // ObjectValue or NamespaceValue: things with attributes.
  bool IsAttributeContainer() const { return IsObjectLike() || kind_ == ValueKind::kNamespace; }

  bool boolean() const { return number_ != 0; }
  double number() const { return number_; }
  const std::string& str() const;
  ArrayData& array() const { return *static_cast<ArrayData*>(heap_.get()); }
  ObjectData& object() const;
  const FunctionData& function() const;
  // Identity of the container, for JavaScript's reference equality.
  const void* identity() const { return heap_.get(); }

 private:
  friend void ReleaseDeferred(std::vector<Value>* values);
  explicit Value(ValueKind k) : kind_(k) {}

  ValueKind kind_ = ValueKind::kUndefined;
  double number_ = 0;
  std::shared_ptr<HeapData> heap_;
};

// An insertion-ordered map (a JavaScript Map): re-setting a key keeps its position.
class ObjectData : public HeapData {
 public:
  ~ObjectData() override;
  const Value* Find(std::string_view key) const;
  void Set(std::string_view key, Value value);
  bool Erase(std::string_view key);
  size_t size() const { return entries_.size(); }
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
  void Clear();

 private:
  // Most objects are small (a message, loop); a hash index is built only past this size.
  static constexpr size_t kIndexThreshold = 12;
  ptrdiff_t Position(std::string_view key) const;
  void Reindex();

  std::vector<std::pair<std::string, Value>> entries_;
  absl::flat_hash_map<std::string, size_t> index_;
};

struct StringData : HeapData {
  explicit StringData(std::string s) : value(std::move(s)) {}
  std::string value;
};

using Args = std::vector<Value>;
using NativeFn =
    std::function<absl::StatusOr<Value>(Interpreter&, Args&, const std::shared_ptr<Env>&)>;

struct FunctionData : HeapData {
  FunctionData(std::string n, NativeFn f) : name(std::move(n)), fn(std::move(f)) {}
  std::string name;
  NativeFn fn;
};

inline const std::string& Value::str() const {
  return static_cast<StringData*>(heap_.get())->value;
}
inline ObjectData& Value::object() const { return *static_cast<ObjectData*>(heap_.get()); }
inline const FunctionData& Value::function() const {
  return *static_cast<FunctionData*>(heap_.get());
}

// Destroys values without recursing once per nesting level, so that a deeply nested
// structure built by a template cannot overflow the stack when it is freed.
void ReleaseDeferred(std::vector<Value>* values);

// __bool__(): Python truthiness, except that a namespace is always true (as in HF).
bool Truthy(const Value& v);
// JavaScript's !!value on the underlying value: any list or object is true.
bool JsTruthy(const Value& v);

// Values nest no deeper than this in serialisation and comparison (JavaScript would
// overflow its stack on cycles; Baton reports an error).
inline constexpr int kMaxValueDepth = 512;

inline constexpr size_t kUnlimited = static_cast<size_t>(-1);

// RuntimeValue.toString(): how {{ value }} prints. Errors for values HF cannot print, and
// when the text would exceed `max_bytes`.
absl::StatusOr<std::string> ToDisplayString(const Value& v, size_t max_bytes = kUnlimited);
// String(value.value): how `+` and `~` see a value (floats lose their ".0", lists join
// their items with ",", objects read "[object Map]").
absl::StatusOr<std::string> ToJsString(const Value& v, size_t max_bytes = kUnlimited);

struct JsonOptions {
  std::optional<double> indent;
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::optional<std::pair<std::string, std::string>> separators;
  size_t max_bytes = kUnlimited;
};
// toJSON() of runtime.ts: Python json.dumps-like separators on JavaScript values.
absl::Status AppendJson(const Value& v, const JsonOptions& options, bool undefined_to_null,
                        std::string* out, int depth = 0);

// left.value == right.value (JavaScript loose equality).
absl::StatusOr<bool> LooseEquals(const Value& a, const Value& b, size_t max_bytes = kUnlimited);
// left.value === right.value.
bool StrictEquals(const Value& a, const Value& b);
// compareRuntimeValues() for sort/dictsort: -1, 0 or 1.
absl::StatusOr<int> CompareValues(const Value& a, const Value& b, bool case_sensitive);

// convertToRuntimeValues() of parsed JSON. Object keys come in JavaScript's property
// order: integer-like keys ascending first, then the rest in the order given.
absl::StatusOr<Value> FromJson(const nlohmann::json& json);
absl::StatusOr<Value> FromJson(const nlohmann::ordered_json& json);

// getAttributeValue() of runtime.ts: follows a dotted path ("a.b", "items.0") through
// objects and list indexes; undefined where it leads nowhere.
Value AttributePath(const Value& item, std::string_view path);

// A key under which JavaScript's Set (SameValueZero) considers two values the same.
std::string SameValueKey(const Value& v);

}  // namespace baton::templating::jinja
