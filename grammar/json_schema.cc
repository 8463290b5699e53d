#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "common/status.h"
#include "common/strings.h"
#include "grammar/json_rules.h"
#include "nlohmann/json.hpp"

namespace baton::grammar {
namespace {

// ordered_json: documents list properties in the order the schema gives them.
using json = nlohmann::ordered_json;
using B = GrammarBuilder;
using Symbol = GrammarBuilder::Symbol;

// Keywords that say nothing about which documents are valid.
const absl::flat_hash_set<std::string>& Annotations() {
  static const auto* set = new absl::flat_hash_set<std::string>{
      "title",    "description", "$schema",    "$id",      "default",  "examples",
      "$comment", "strict",      "deprecated", "readOnly", "writeOnly"};
  return *set;
}

// Keywords this compiler acts on; every other keyword is refused by name.
const absl::flat_hash_set<std::string>& Known() {
  static const auto* set = new absl::flat_hash_set<std::string>{"type",
                                                                "properties",
                                                                "required",
                                                                "additionalProperties",
                                                                "enum",
                                                                "const",
                                                                "items",
                                                                "prefixItems",
                                                                "minItems",
                                                                "maxItems",
                                                                "anyOf",
                                                                "allOf",
                                                                "$ref",
                                                                "$defs",
                                                                "definitions",
                                                                "nullable",
                                                                "minLength",
                                                                "maxLength",
                                                                "format",
                                                                "uniqueItems",
                                                                "minimum",
                                                                "maximum",
                                                                "exclusiveMinimum",
                                                                "exclusiveMaximum"};
  return *set;
}

std::string Escape(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

absl::Status Error(const std::string& ptr, std::string_view what) {
  return absl::InvalidArgumentError(baton::StrCat(ptr, ": ", what));
}

bool MatchesType(const json& v, const std::string& type) {
  if (type == "string") return v.is_string();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    if (v.is_number_integer()) return true;
    if (!v.is_number_float()) return false;
    const double d = v.get<double>();
    return d == static_cast<double>(static_cast<int64_t>(d));
  }
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  return false;
}

class Compiler {
 public:
  Compiler(const json& root, const SchemaLimits& limits)
      : root_(root), limits_(limits), rules_(&b_) {}

  absl::StatusOr<std::shared_ptr<const Grammar>> Run() {
    BATON_ASSIGN_OR_RETURN(int32_t value, Schema(root_, "schema", 0));
    // An optional space before the root: BPE vocabularies have " {" and the like.
    const int32_t root = b_.AddRule("root");
    b_.AddAlternative(root, {B::Rule(value)});
    b_.AddAlternative(root, {B::Byte(' '), B::Rule(value)});
    BATON_RETURN_IF_ERROR(CheckRules(0));
    return std::move(b_).Build(root);
  }

 private:
  absl::Status CheckRules(int64_t more) {
    if (static_cast<size_t>(b_.num_rules() + more) > limits_.max_rules) {
      return absl::InvalidArgumentError(baton::StrCat(
          "schema: the compiled grammar exceeds max_rules (", limits_.max_rules, ")"));
    }
    return absl::OkStatus();
  }

  // The schema's keywords that are neither annotations nor `allowed`.
  absl::Status OnlyKeywords(const json& s, const std::string& ptr, std::string_view what,
                            std::initializer_list<std::string_view> allowed) {
    for (const auto& [key, value] : s.items()) {
      if (Annotations().contains(key) || key == "$defs" || key == "definitions") continue;
      bool ok = false;
      for (std::string_view a : allowed) ok = ok || key == a;
      if (!ok) {
        return Error(
            ptr, baton::StrCat("'", what, "' with sibling keyword '", key, "' is not supported"));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int32_t> Schema(const json& s, const std::string& ptr, int depth) {
    if (depth > limits_.max_depth) {
      return Error(ptr,
                   baton::StrCat("schema nesting exceeds max_depth (", limits_.max_depth, ")"));
    }
    BATON_RETURN_IF_ERROR(CheckRules(0));
    if (s.is_boolean()) {
      if (s.get<bool>()) return rules_.AnyValue();
      return Error(ptr, "the schema 'false' accepts no document");
    }
    if (!s.is_object()) return Error(ptr, "a schema must be an object or a boolean");
    for (const auto& [key, value] : s.items()) {
      if (Annotations().contains(key) || Known().contains(key)) continue;
      if (key == "oneOf") {
        return Error(ptr,
                     "'oneOf' is not supported (anyOf is; oneOf also requires that no "
                     "two branches match, which a grammar cannot check)");
      }
      return Error(ptr, baton::StrCat("'", key, "' is not supported"));
    }
    if (s.contains("$ref")) {
      BATON_RETURN_IF_ERROR(OnlyKeywords(s, ptr, "$ref", {"$ref"}));
      return Ref(s["$ref"], ptr + "/$ref", depth);
    }
    if (s.contains("allOf")) {
      const json& all = s["allOf"];
      if (!all.is_array() || all.size() != 1) {
        return Error(ptr + "/allOf", "'allOf' is supported only with exactly one schema");
      }
      BATON_RETURN_IF_ERROR(OnlyKeywords(s, ptr, "allOf", {"allOf"}));
      return Schema(all[0], ptr + "/allOf/0", depth + 1);
    }
    if (s.contains("anyOf")) {
      BATON_RETURN_IF_ERROR(OnlyKeywords(s, ptr, "anyOf", {"anyOf", "nullable"}));
      const json& any = s["anyOf"];
      if (!any.is_array() || any.empty()) {
        return Error(ptr + "/anyOf", "'anyOf' must be a non-empty array of schemas");
      }
      std::vector<int32_t> alts;
      for (size_t i = 0; i < any.size(); ++i) {
        BATON_ASSIGN_OR_RETURN(int32_t r,
                               Schema(any[i], baton::StrCat(ptr, "/anyOf/", i), depth + 1));
        alts.push_back(r);
      }
      if (Nullable(s)) alts.push_back(rules_.Null());
      return Union("anyOf", alts);
    }
    // The types this schema admits.
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const json& e : t) {
          if (!e.is_string()) return Error(ptr + "/type", "'type' must name types");
          types.push_back(e.get<std::string>());
        }
      } else {
        return Error(ptr + "/type", "'type' must be a string or a non-empty array of strings");
      }
      for (const auto& t : types) {
        if (t != "string" && t != "number" && t != "integer" && t != "boolean" && t != "null" &&
            t != "object" && t != "array") {
          return Error(ptr + "/type", baton::StrCat("'type' '", t, "' is not supported"));
        }
      }
    }
    if (s.contains("enum") || s.contains("const")) {
      BATON_RETURN_IF_ERROR(OnlyKeywords(s, ptr, s.contains("enum") ? "enum" : "const",
                                         {"enum", "const", "type", "nullable"}));
      std::vector<json> values;
      if (s.contains("enum")) {
        if (!s["enum"].is_array()) return Error(ptr + "/enum", "'enum' must be an array");
        for (const json& v : s["enum"]) values.push_back(v);
      }
      if (s.contains("const")) {
        if (s.contains("enum")) return Error(ptr, "'enum' with 'const' is not supported");
        values.push_back(s["const"]);
      }
      if (Nullable(s)) {
        values.push_back(nullptr);
        if (!types.empty()) types.push_back("null");
      }
      if (!types.empty()) {
        std::erase_if(values, [&](const json& v) {
          for (const auto& t : types) {
            if (MatchesType(v, t)) return false;
          }
          return true;
        });
      }
      if (values.empty()) return Error(ptr, "no value of 'enum' or 'const' matches 'type'");
      return Literals(values);
    }
    if (types.empty()) {
      // Infer the type from the keywords that apply to one type only.
      if (s.contains("properties") || s.contains("required") ||
          s.contains("additionalProperties")) {
        types.push_back("object");
      } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") ||
                 s.contains("maxItems")) {
        types.push_back("array");
      } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("format")) {
        types.push_back("string");
      } else if (HasNumericBound(s)) {
        types.push_back("number");  // refused below: bounds are exact for integers only
      } else {
        return rules_.AnyValue();
      }
    }
    if (Nullable(s)) types.push_back("null");
    std::vector<int32_t> alts;
    for (const auto& t : types) {
      int32_t r;
      if (t == "string") {
        BATON_ASSIGN_OR_RETURN(r, String(s, ptr));
      } else if (t == "number") {
        for (const char* key : kNumericBounds) {
          if (s.contains(key)) return Error(ptr, baton::StrCat("'", key, "' is not supported"));
        }
        r = rules_.Number();
      } else if (t == "integer") {
        BATON_ASSIGN_OR_RETURN(r, Integer(s, ptr));
      } else if (t == "boolean") {
        r = rules_.Boolean();
      } else if (t == "null") {
        r = rules_.Null();
      } else if (t == "object") {
        BATON_ASSIGN_OR_RETURN(r, Object(s, ptr, depth));
      } else {
        BATON_ASSIGN_OR_RETURN(r, Array(s, ptr, depth));
      }
      alts.push_back(r);
    }
    return Union("types", alts);
  }

  static constexpr const char* kNumericBounds[] = {"minimum", "maximum", "exclusiveMinimum",
                                                   "exclusiveMaximum"};

  static bool HasNumericBound(const json& s) {
    for (const char* key : kNumericBounds) {
      if (s.contains(key)) return true;
    }
    return false;
  }

  // The smallest (lower) or largest (upper) integer a bound admits, clamped to
  // +-kClamp, which is beyond the grammar's integers, so nothing overflows.
  static constexpr int64_t kClamp = kMaxIntMagnitude + 10;
  static int64_t IntegerBound(const json& v, bool lower, bool exclusive) {
    int64_t x;
    if (v.is_number_unsigned()) {
      x = static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), kClamp));
    } else if (v.is_number_integer()) {
      x = std::clamp<int64_t>(v.get<int64_t>(), -kClamp, kClamp);
    } else {
      // kClamp is not a double exactly (1e16 + 8 as one), still beyond every integer the
      // grammar allows.
      const double limit = static_cast<double>(kClamp);
      const double d = std::clamp(v.get<double>(), -limit, limit);
      const double f = lower ? std::ceil(d) : std::floor(d);
      x = static_cast<int64_t>(f);
      // A fractional exclusive bound excludes nothing more than the inclusive one.
      if (f != d) exclusive = false;
    }
    if (exclusive) x += lower ? 1 : -1;
    return x;
  }

  // {"type": "integer"} with optional minimum, maximum, exclusiveMinimum and
  // exclusiveMaximum (numbers, or booleans qualifying minimum/maximum as in draft 4).
  absl::StatusOr<int32_t> Integer(const json& s, const std::string& ptr) {
    if (!HasNumericBound(s)) return rules_.Integer();
    int64_t lo = -kClamp, hi = kClamp;
    for (const char* key : kNumericBounds) {
      auto it = s.find(key);
      if (it == s.end()) continue;
      const bool exclusive_key = key[0] == 'e';
      if (exclusive_key && it->is_boolean()) continue;  // read with minimum/maximum
      if (!it->is_number()) {
        return Error(ptr + "/" + key, baton::StrCat("'", key, "' must be a number"));
      }
      const bool lower = std::string_view(key).ends_with("inimum");
      bool exclusive = exclusive_key;
      if (!exclusive_key) {
        auto flag = s.find(lower ? "exclusiveMinimum" : "exclusiveMaximum");
        exclusive = flag != s.end() && flag->is_boolean() && flag->get<bool>();
      }
      const int64_t x = IntegerBound(*it, lower, exclusive);
      if (lower) {
        lo = std::max(lo, x);
      } else {
        hi = std::min(hi, x);
      }
    }
    if (lo > hi) return Error(ptr, "the range of 'minimum'/'maximum' contains no integer");
    lo = std::max(lo, -kMaxIntMagnitude);
    hi = std::min(hi, kMaxIntMagnitude);
    if (lo > hi) {
      return Error(ptr, baton::StrCat("the range of 'minimum'/'maximum' contains no integer of at "
                                      "most ",
                                      kMaxIntDigits, " digits"));
    }
    BATON_RETURN_IF_ERROR(CheckRules(6 * kMaxIntDigits));
    return rules_.IntegerRange(lo, hi);
  }

  static bool Nullable(const json& s) {
    auto it = s.find("nullable");
    return it != s.end() && it->is_boolean() && it->get<bool>();
  }

  int32_t Union(const char* name, const std::vector<int32_t>& alts) {
    if (alts.size() == 1) return alts[0];
    const int32_t r = b_.AddRule(name);
    for (int32_t a : alts) b_.AddAlternative(r, {B::Rule(a)});
    return r;
  }

  int32_t Literals(const std::vector<json>& values) {
    const int32_t r = b_.AddRule("enum");
    absl::flat_hash_set<std::string> seen;
    for (const json& v : values) {
      // Compact, UTF-8 kept raw: the one spelling of each value the grammar allows.
      std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
      if (seen.insert(text).second) b_.AddAlternative(r, B::Literal(text));
    }
    return r;
  }

  absl::StatusOr<int32_t> Ref(const json& ref, const std::string& ptr, int depth) {
    if (!ref.is_string()) return Error(ptr, "'$ref' must be a string");
    const std::string target = ref.get<std::string>();
    if (target.empty() || target[0] != '#') {
      return Error(ptr, baton::StrCat("'$ref' '", target,
                                      "' is not supported (only local references, \"#/...\")"));
    }
    const json* node = &root_;
    std::string where = "schema";
    if (target.size() > 1) {
      if (target[1] != '/') {
        return Error(ptr, baton::StrCat("'$ref' '", target, "' is not a JSON pointer"));
      }
      std::vector<std::string_view> parts;
      for (size_t at = 2;;) {
        const size_t slash = target.find('/', at);
        parts.push_back(std::string_view(target).substr(
            at, slash == std::string::npos ? std::string::npos : slash - at));
        if (slash == std::string::npos) break;
        at = slash + 1;
      }
      for (std::string_view part : parts) {
        std::string key;
        for (size_t i = 0; i < part.size(); ++i) {
          if (part[i] == '~' && i + 1 < part.size() && (part[i + 1] == '0' || part[i + 1] == '1')) {
            key += part[i + 1] == '0' ? '~' : '/';
            ++i;
          } else {
            key += part[i];
          }
        }
        if (!node->is_object() || !node->contains(key)) {
          return Error(ptr, baton::StrCat("'$ref' '", target, "' does not resolve"));
        }
        node = &(*node)[key];
        where += "/" + Escape(key);
      }
    }
    if (auto it = refs_.find(node); it != refs_.end()) return it->second;
    // The rule exists before its body, so a recursive reference finds it.
    const int32_t r = b_.AddRule(baton::StrCat("ref:", target));
    refs_[node] = r;
    BATON_ASSIGN_OR_RETURN(int32_t body, Schema(*node, where, depth + 1));
    b_.AddAlternative(r, {B::Rule(body)});
    return r;
  }

  absl::StatusOr<int64_t> Count(const json& s, const char* key, const std::string& ptr,
                                int64_t absent) {
    auto it = s.find(key);
    if (it == s.end()) return absent;
    if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) {
      return Error(ptr + "/" + key, baton::StrCat("'", key, "' must be a non-negative integer"));
    }
    // Clamped far above any rule budget, so the bound check below cannot overflow.
    constexpr uint64_t kHuge = uint64_t{1} << 40;
    return static_cast<int64_t>(std::min<uint64_t>(it->get<uint64_t>(), kHuge));
  }

  absl::StatusOr<int32_t> String(const json& s, const std::string& ptr) {
    BATON_ASSIGN_OR_RETURN(int64_t min, Count(s, "minLength", ptr, 0));
    BATON_ASSIGN_OR_RETURN(int64_t max, Count(s, "maxLength", ptr, -1));
    if (auto it = s.find("format"); it != s.end()) {
      const std::string name = it->is_string() ? it->get<std::string>() : it->dump();
      if (s.contains("minLength") || s.contains("maxLength")) {
        return Error(ptr, "'format' with 'minLength' or 'maxLength' is not supported");
      }
      const int32_t r = rules_.Format(name);
      if (r < 0) {
        return Error(ptr + "/format",
                     baton::StrCat("'format' '", name,
                                   "' is not supported (supported: date-time, date, time, uuid)"));
      }
      return r;
    }
    if (max >= 0 && min > max) return Error(ptr, "'minLength' is greater than 'maxLength'");
    BATON_RETURN_IF_ERROR(CheckRules((max >= 0 ? max : min) + 2));
    return rules_.BoundedString(min, max);
  }

  absl::StatusOr<int32_t> Object(const json& s, const std::string& ptr, int depth) {
    if (auto it = s.find("additionalProperties");
        it != s.end() && !(it->is_boolean() && !it->get<bool>())) {
      return Error(ptr + "/additionalProperties",
                   "'additionalProperties' other than false is not supported");
    }
    if (!s.contains("properties") && !s.contains("additionalProperties") &&
        !s.contains("required")) {
      return rules_.AnyObject();  // {"type": "object"}: any object
    }
    static const json kEmpty = json::object();
    const json& props = s.contains("properties") ? s["properties"] : kEmpty;
    if (!props.is_object()) return Error(ptr + "/properties", "'properties' must be an object");
    absl::flat_hash_set<std::string> required;
    if (auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) return Error(ptr + "/required", "'required' must be an array");
      for (const json& name : *it) {
        if (!name.is_string()) return Error(ptr + "/required", "'required' must name properties");
        if (!props.contains(name.get<std::string>())) {
          return Error(ptr + "/required",
                       baton::StrCat("'required' names '", name.get<std::string>(),
                                     "', which is not in 'properties'"));
        }
        required.insert(name.get<std::string>());
      }
    }
    const int32_t ws = rules_.Ws();
    const int32_t colon_ws = rules_.ColonWs();
    // Members in the order of 'properties'. rest[i]: after a member, from property i on;
    // first[i]: the first member is property i or later.
    struct Prop {
      std::vector<Symbol> member;
      bool required;
    };
    std::vector<Prop> list;
    for (const auto& [name, sub] : props.items()) {
      BATON_ASSIGN_OR_RETURN(int32_t value,
                             Schema(sub, ptr + "/properties/" + Escape(name), depth + 1));
      std::vector<Symbol> member =
          B::Literal(json(name).dump(-1, ' ', false, json::error_handler_t::replace));
      member.push_back(B::Byte(':'));
      member.push_back(B::Rule(colon_ws));
      member.push_back(B::Rule(value));
      list.push_back({std::move(member), required.contains(name)});
    }
    BATON_RETURN_IF_ERROR(CheckRules(2 * static_cast<int64_t>(list.size()) + 3));
    const size_t n = list.size();
    std::vector<int32_t> rest(n + 1), first(n + 1);
    rest[n] = b_.AddRule("members_end");
    b_.AddAlternative(rest[n], {});
    first[n] = b_.AddRule("no_member");  // no alternatives: pruned by Build()
    for (size_t i = n; i-- > 0;) {
      rest[i] = b_.AddRule(baton::StrCat("members_after", i));
      std::vector<Symbol> sep = {B::Byte(','), B::Rule(ws)};
      sep.insert(sep.end(), list[i].member.begin(), list[i].member.end());
      sep.push_back(B::Rule(rest[i + 1]));
      b_.AddAlternative(rest[i], std::move(sep));
      if (!list[i].required) b_.AddAlternative(rest[i], {B::Rule(rest[i + 1])});
      first[i] = b_.AddRule(baton::StrCat("members_from", i));
      std::vector<Symbol> m = list[i].member;
      m.push_back(B::Rule(rest[i + 1]));
      b_.AddAlternative(first[i], std::move(m));
      if (!list[i].required) b_.AddAlternative(first[i], {B::Rule(first[i + 1])});
    }
    const int32_t obj = b_.AddRule("object");
    b_.AddAlternative(obj,
                      {B::Byte('{'), B::Rule(ws), B::Rule(first[0]), B::Rule(ws), B::Byte('}')});
    if (required.empty()) b_.AddAlternative(obj, {B::Byte('{'), B::Rule(ws), B::Byte('}')});
    return obj;
  }

  absl::StatusOr<int32_t> Array(const json& s, const std::string& ptr, int depth) {
    if (auto it = s.find("uniqueItems"); it != s.end() && !(it->is_boolean() && !it->get<bool>())) {
      return Error(ptr + "/uniqueItems", "'uniqueItems' is not supported");
    }
    BATON_ASSIGN_OR_RETURN(int64_t min, Count(s, "minItems", ptr, 0));
    BATON_ASSIGN_OR_RETURN(int64_t max, Count(s, "maxItems", ptr, -1));
    std::vector<int32_t> prefix;
    if (auto it = s.find("prefixItems"); it != s.end()) {
      if (!it->is_array()) return Error(ptr + "/prefixItems", "'prefixItems' must be an array");
      for (size_t i = 0; i < it->size(); ++i) {
        BATON_ASSIGN_OR_RETURN(int32_t r,
                               Schema((*it)[i], baton::StrCat(ptr, "/prefixItems/", i), depth + 1));
        prefix.push_back(r);
      }
    }
    int32_t item = -1;  // -1: no items past the prefix
    if (auto it = s.find("items"); it == s.end()) {
      item = rules_.AnyValue();
    } else if (it->is_array()) {
      return Error(ptr + "/items", "'items' as an array is not supported (use 'prefixItems')");
    } else if (!(it->is_boolean() && !it->get<bool>())) {
      BATON_ASSIGN_OR_RETURN(item, Schema(*it, ptr + "/items", depth + 1));
    }
    const int64_t p = static_cast<int64_t>(prefix.size());
    if (item < 0 && (max < 0 || max > p)) max = p;
    if (max >= 0 && min > max) {
      return Error(ptr, "'minItems' is greater than the number of items allowed");
    }
    auto element = [&](int64_t k) { return k < p ? prefix[k] : item; };
    const int32_t ws = rules_.Ws();
    // after[k]: k elements so far (k >= 1). Unbounded: a loop from max(p, min) on.
    const int64_t last = max >= 0 ? max : std::max({p, min, int64_t{1}});
    BATON_RETURN_IF_ERROR(CheckRules(last + 3));
    int32_t next = -1;
    for (int64_t k = last; k >= 1; --k) {
      const int32_t r = b_.AddRule(baton::StrCat("items_after", k));
      if (k >= min) b_.AddAlternative(r, {});
      if (max < 0 && k == last) {
        b_.AddAlternative(r, {B::Byte(','), B::Rule(ws), B::Rule(item), B::Rule(r)});
      } else if (k < last) {
        b_.AddAlternative(r, {B::Byte(','), B::Rule(ws), B::Rule(element(k)), B::Rule(next)});
      }
      next = r;
    }
    const int32_t arr = b_.AddRule("array");
    if (min == 0) b_.AddAlternative(arr, {B::Byte('['), B::Rule(ws), B::Byte(']')});
    if (last >= 1 && element(0) >= 0) {
      b_.AddAlternative(arr, {B::Byte('['), B::Rule(ws), B::Rule(element(0)), B::Rule(next),
                              B::Rule(ws), B::Byte(']')});
    }
    return arr;
  }

  const json& root_;
  const SchemaLimits& limits_;
  GrammarBuilder b_;
  JsonRules rules_;
  absl::flat_hash_map<const json*, int32_t> refs_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonSchema(std::string_view schema_json,
                                                                 const SchemaLimits& limits) {
  if (schema_json.size() > limits.max_schema_bytes) {
    return absl::InvalidArgumentError(baton::StrCat("schema: ", schema_json.size(),
                                                    " bytes exceeds max_schema_bytes (",
                                                    limits.max_schema_bytes, ")"));
  }
  json root = json::parse(schema_json, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return absl::InvalidArgumentError("schema: not valid JSON");
  try {
    return Compiler(root, limits).Run();
  } catch (const std::exception& e) {  // nlohmann's accessors; not expected
    return absl::InvalidArgumentError(baton::StrCat("schema: ", e.what()));
  }
}

std::shared_ptr<const Grammar> JsonObjectGrammar() {
  static const auto* grammar = [] {
    GrammarBuilder b;
    JsonRules rules(&b);
    const int32_t object = rules.AnyObject();
    const int32_t root = b.AddRule("root");
    b.AddAlternative(root, {B::Rule(object)});
    b.AddAlternative(root, {B::Byte(' '), B::Rule(object)});
    auto built = std::move(b).Build(root);
    return new std::shared_ptr<const Grammar>(*std::move(built));
  }();
  return *grammar;
}

}  // namespace baton::grammar
