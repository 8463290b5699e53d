// Real-world-like JSON schemas (OpenAI structured-output examples and tool calls) for the
// grammar tests, and a reference validator for the subset the compiler supports, written
// from the JSON Schema semantics rather than from the compiler.
#pragma once

#include <cstdint>
#include <regex>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace baton::grammar::testing {

struct NamedSchema {
  const char* name;
  const char* schema;
};

inline const std::vector<NamedSchema>& SchemaCorpus() {
  static const auto* corpus = new std::vector<NamedSchema>{
      {"math_reasoning", R"({"type":"object","properties":{"steps":{"type":"array","items":{
        "type":"object","properties":{"explanation":{"type":"string"},"output":{"type":"string"}},
        "required":["explanation","output"],"additionalProperties":false}},
        "final_answer":{"type":"string"}},"required":["steps","final_answer"],
        "additionalProperties":false})"},
      {"ui_recursive_root", R"({"type":"object","properties":{"type":{"type":"string",
        "enum":["div","button","header","section","field","form"]},"label":{"type":"string"},
        "children":{"type":"array","items":{"$ref":"#"}},"attributes":{"type":"array","items":{
        "type":"object","properties":{"name":{"type":"string"},"value":{"type":"string"}},
        "required":["name","value"],"additionalProperties":false}}},
        "required":["type","label","children","attributes"],"additionalProperties":false})"},
      {"linked_list_defs", R"({"$defs":{"node":{"type":"object","properties":{
        "value":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},
        "required":["value","next"],"additionalProperties":false}},"$ref":"#/$defs/node"})"},
      {"event_extraction", R"({"type":"object","properties":{"name":{"type":"string"},
        "date":{"type":"string","format":"date"},"participants":{"type":"array",
        "items":{"type":"string"}}},"required":["name","date","participants"],
        "additionalProperties":false})"},
      {"research_paper",
       R"({"type":"object","title":"paper","properties":{"title":{"type":"string"},
        "authors":{"type":"array","items":{"type":"string"}},"abstract":{"type":"string"},
        "keywords":{"type":"array","items":{"type":"string"},"maxItems":5}},
        "required":["title","authors","abstract","keywords"],"additionalProperties":false})"},
      {"moderation", R"({"type":"object","properties":{"is_violating":{"type":"boolean"},
        "category":{"type":["string","null"],"enum":["violence","sexual","self_harm",null]},
        "explanation_if_violating":{"type":["string","null"]}},
        "required":["is_violating","category","explanation_if_violating"],
        "additionalProperties":false})"},
      {"calendar_formats", R"({"type":"object","properties":{"id":{"type":"string","format":"uuid"},
        "start":{"type":"string","format":"date-time"},"reminder":{"type":"string","format":"time"},
        "day":{"type":"string","format":"date"}},"required":["id","start","reminder","day"]})"},
      {"enums_consts", R"({"type":"object","properties":{"color":{"enum":["red","green","blue"]},
        "size":{"enum":[1,2,3.5,"XL",true,null,{"a":[1]}]},"mode":{"const":"fast"}},
        "required":["color","size","mode"]})"},
      {"nullable", R"({"type":"object","properties":{"nickname":{"type":"string","nullable":true},
        "age":{"anyOf":[{"type":"integer"},{"type":"null"}]}},"required":["nickname","age"]})"},
      {"optional_props", R"({"type":"object","properties":{"a":{"type":"integer"},
        "b":{"type":"boolean"},"c":{"type":"number"},"d":{"type":"string"}},"required":["b"]})"},
      {"tuple", R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],
        "items":false})"},
      {"bounded_array", R"({"type":"array","items":{"type":"number"},"minItems":2,"maxItems":4})"},
      {"string_lengths", R"({"type":"object","properties":{"code":{"type":"string","minLength":2,
        "maxLength":5},"tag":{"type":"string","minLength":1}},"required":["code","tag"],
        "additionalProperties":false})"},
      {"any_value", R"({})"},
      {"tool_call", R"({"type":"object","properties":{"name":{"const":"get_weather"},
        "arguments":{"type":"object","properties":{"location":{"type":"string"},
        "unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location","unit"],
        "additionalProperties":false}},"required":["name","arguments"]})"},
      {"shapes_anyof", R"({"anyOf":[{"type":"object","properties":{"kind":{"const":"circle"},
        "r":{"type":"number"}},"required":["kind","r"]},{"type":"object","properties":{
        "kind":{"const":"rect"},"w":{"type":"number"},"h":{"type":"number"}},
        "required":["kind","w","h"]}]})"},
      {"root_integer", R"({"type":"integer"})"},
      {"any_object", R"({"type":"object"})"},
      {"customer_definitions", R"({"definitions":{"address":{"type":"object","properties":{
        "street":{"type":"string"},"city":{"type":"string"},"zip":{"type":"string",
        "maxLength":10}},"required":["street","city"]}},"type":"object","properties":{
        "name":{"type":"string"},"billing":{"$ref":"#/definitions/address"},
        "shipping":{"$ref":"#/definitions/address"},"tags":{"type":"array",
        "items":{"type":"string"},"minItems":1}},"required":["name","billing"]})"},
      {"unicode", R"({"type":"object","properties":{"naïve":{"type":"string",
        "enum":["café","日本"]},"note":{"type":"string","maxLength":3}},"required":["naïve"]})"},
      {"zod_integers", R"({"type":"object","properties":{"count":{"type":"integer",
        "minimum":-9007199254740991,"maximum":9007199254740991},"age":{"type":"integer",
        "minimum":0,"exclusiveMaximum":150},"delta":{"type":["integer","null"],"minimum":-20,
        "maximum":-3}},"required":["count","age","delta"],"additionalProperties":false})"},
  };
  return *corpus;
}

using Json = nlohmann::json;

inline size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

inline bool FormatOk(const std::string& format, const std::string& s) {
  static const std::regex date(R"((\d{4})-(\d{2})-(\d{2}))");
  static const std::regex time(
      R"(([01]\d|2[0-3]):([0-5]\d):([0-5]\d)(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))");
  static const std::regex uuid(
      R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})");
  auto date_ok = [&](const std::string& d) {
    std::smatch m;
    if (!std::regex_match(d, m, date)) return false;
    const int month = std::stoi(m[2]), day = std::stoi(m[3]);
    // February: 29 in every year, the grammar's documented simplification.
    static const int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return month >= 1 && month <= 12 && day >= 1 && day <= kDays[month - 1];
  };
  if (format == "date") return date_ok(s);
  if (format == "time") return std::regex_match(s, time);
  if (format == "uuid") return std::regex_match(s, uuid);
  if (format == "date-time") {
    const size_t t = s.find('T');
    return t != std::string::npos && date_ok(s.substr(0, t)) &&
           std::regex_match(s.substr(t + 1), time);
  }
  return false;
}

// JSON Schema validation for the keywords the compiler accepts.
inline bool Validate(const Json& root, const Json& s, const Json& v) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"];
    const Json* node = &root;
    if (ref.size() > 1) node = &root.at(Json::json_pointer(ref.substr(1)));
    return Validate(root, *node, v);
  }
  const bool nullable = s.value("nullable", false);
  if (nullable && v.is_null()) return true;
  if (s.contains("allOf")) {
    for (const Json& sub : s["allOf"]) {
      if (!Validate(root, sub, v)) return false;
    }
  }
  if (s.contains("anyOf")) {
    bool any = false;
    for (const Json& sub : s["anyOf"]) any = any || Validate(root, sub, v);
    if (!any) return false;
  }
  if (s.contains("enum")) {
    bool any = false;
    for (const Json& e : s["enum"]) any = any || e == v;
    if (!any) return false;
  }
  if (s.contains("const") && !(s["const"] == v)) return false;
  if (s.contains("type")) {
    std::vector<std::string> types;
    if (s["type"].is_string()) {
      types.push_back(s["type"]);
    } else {
      for (const Json& t : s["type"]) types.push_back(t);
    }
    bool any = false;
    for (const auto& t : types) {
      any = any || (t == "string" && v.is_string()) || (t == "number" && v.is_number()) ||
            (t == "integer" && v.is_number_integer()) || (t == "boolean" && v.is_boolean()) ||
            (t == "null" && v.is_null()) || (t == "object" && v.is_object()) ||
            (t == "array" && v.is_array());
    }
    if (!any) return false;
  }
  if (v.is_string()) {
    const std::string str = v;
    if (s.contains("minLength") && CodePoints(str) < s["minLength"].get<size_t>()) return false;
    if (s.contains("maxLength") && CodePoints(str) > s["maxLength"].get<size_t>()) return false;
    if (s.contains("format") && !FormatOk(s["format"], str)) return false;
  }
  if (v.is_number()) {
    if (s.contains("minimum") && v < s["minimum"]) return false;
    if (s.contains("maximum") && v > s["maximum"]) return false;
    if (s.contains("exclusiveMinimum") && !(v > s["exclusiveMinimum"])) return false;
    if (s.contains("exclusiveMaximum") && !(v < s["exclusiveMaximum"])) return false;
  }
  if (v.is_object()) {
    const Json props = s.value("properties", Json::object());
    for (const auto& [k, sub] : v.items()) {
      if (props.contains(k)) {
        if (!Validate(root, props[k], sub)) return false;
      } else if (s.contains("additionalProperties") && s["additionalProperties"] == false) {
        return false;
      }
    }
    if (s.contains("required")) {
      for (const Json& r : s["required"]) {
        if (!v.contains(r.get<std::string>())) return false;
      }
    }
  }
  if (v.is_array()) {
    const size_t n = v.size();
    if (s.contains("minItems") && n < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && n > s["maxItems"].get<size_t>()) return false;
    const size_t p = s.contains("prefixItems") ? s["prefixItems"].size() : 0;
    for (size_t i = 0; i < n; ++i) {
      if (i < p) {
        if (!Validate(root, s["prefixItems"][i], v[i])) return false;
      } else if (s.contains("items") && !Validate(root, s["items"], v[i])) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace baton::grammar::testing
