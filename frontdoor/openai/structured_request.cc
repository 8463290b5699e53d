#include "frontdoor/openai/structured_request.h"

#include <string_view>
#include <utility>

#include "common/status.h"
#include "common/strings.h"
#include "frontdoor/openai/openai_error.h"
#include "frontdoor/openai/openai_json.h"
#include "grammar/json_schema.h"

namespace baton::frontdoor {
namespace {

using Json = nlohmann::ordered_json;

absl::Status TypeError(std::string_view path, std::string_view expected, const Json& got) {
  return ParamError(path, StrCat("'", path, "' must be ", expected, ", got ", JsonTypeName(got)));
}

const Json* Find(const Json& object, std::string_view key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// Compiles `schema` as a worker will, so that what the grammar engine cannot serve is the
// client's 400 here, naming `path`, rather than a failed request later.
absl::Status CheckCompiles(const std::string& schema, std::string_view path) {
  absl::StatusOr<std::shared_ptr<const grammar::Grammar>> compiled =
      grammar::CompileJsonSchema(schema);
  if (compiled.ok()) return absl::OkStatus();
  return ParamError(path, StrCat("'", path, "' cannot be served: ", compiled.status().message()));
}

const Json* ToolNamed(const OpenAiRequest& r, std::string_view name) {
  const Json* tools = Find(r.chat, "tools");
  if (tools == nullptr) return nullptr;
  for (const Json& tool : *tools) {
    const Json& function = tool.at("function");
    if (function.at("name").get_ref<const std::string&>() == name) return &function;
  }
  return nullptr;
}

// A function's parameters schema; a function without one takes no arguments.
Json ParametersOf(const Json& function) {
  if (const Json* p = Find(function, "parameters"); p != nullptr && !p->is_null()) return *p;
  return Json{{"type", "object"}, {"properties", Json::object()}};
}

// Rewrites local references "#/$defs/X" (and "#/definitions/X") under `node` to
// "#/$defs/<prefix>X": a tool's definitions move to the combined schema's root.
void RenameRefs(Json* node, const std::string& prefix) {
  if (node->is_object()) {
    for (auto& [key, value] : node->items()) {
      if (key == "$ref" && value.is_string()) {
        const std::string& ref = value.get_ref<const std::string&>();
        for (std::string_view root : {"#/$defs/", "#/definitions/"}) {
          if (ref.starts_with(root)) {
            value = StrCat("#/$defs/", prefix, ref.substr(root.size()));
            break;
          }
        }
      } else {
        RenameRefs(&value, prefix);
      }
    }
  } else if (node->is_array()) {
    for (Json& value : *node) RenameRefs(&value, prefix);
  }
}

}  // namespace

absl::Status ParseResponseFormat(const Json& body, OpenAiRequest* r) {
  const Json* v = Find(body, "response_format");
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  if (!v->is_object()) return TypeError("response_format", "an object", *v);
  const Json* type = Find(*v, "type");
  if (type == nullptr || !type->is_string()) {
    return ParamError("response_format.type", "'response_format.type' must be a string");
  }
  const std::string& kind = type->get_ref<const std::string&>();
  if (kind == "text") return absl::OkStatus();
  if (kind == "json_object") {
    r->constraint = OpenAiRequest::Constraint::kJsonObject;
    return absl::OkStatus();
  }
  if (kind != "json_schema") {
    return ParamError("response_format.type",
                      StrCat("'response_format.type' is '", kind.substr(0, 40),
                             "'; expected 'text', 'json_object' or 'json_schema'"));
  }
  const Json* spec = Find(*v, "json_schema");
  if (spec == nullptr) {
    return ParamError("response_format.json_schema",
                      "'response_format.json_schema' is required when the type is 'json_schema'");
  }
  if (!spec->is_object()) return TypeError("response_format.json_schema", "an object", *spec);
  // OpenAI requires a name; we only check its type, as it changes nothing here.
  if (const Json* name = Find(*spec, "name"); name != nullptr && !name->is_string()) {
    return TypeError("response_format.json_schema.name", "a string", *name);
  }
  if (const Json* strict = Find(*spec, "strict");
      strict != nullptr && !strict->is_boolean() && !strict->is_null()) {
    return TypeError("response_format.json_schema.strict", "a boolean", *strict);
  }
  const Json* schema = Find(*spec, "schema");
  if (schema == nullptr) {
    return ParamError("response_format.json_schema.schema",
                      "'response_format.json_schema.schema' is required");
  }
  if (!schema->is_object() && !schema->is_boolean()) {
    return TypeError("response_format.json_schema.schema", "an object", *schema);
  }
  r->constraint = OpenAiRequest::Constraint::kJsonSchema;
  r->constraint_schema = DumpJson(*schema);
  return CheckCompiles(r->constraint_schema, "response_format.json_schema.schema");
}

absl::Status ParseToolChoice(const Json& body, OpenAiRequest* r) {
  const Json* tools = Find(r->chat, "tools");
  const bool has_tools = tools != nullptr && !tools->empty();
  r->tool_choice = has_tools ? OpenAiRequest::ToolChoice::kAuto : OpenAiRequest::ToolChoice::kNone;
  if (const Json* p = Find(body, "parallel_tool_calls"); p != nullptr && !p->is_null()) {
    if (!p->is_boolean()) return TypeError("parallel_tool_calls", "a boolean", *p);
    r->parallel_tool_calls = p->get<bool>();
  }
  const Json* v = Find(body, "tool_choice");
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  if (v->is_string()) {
    const std::string& choice = v->get_ref<const std::string&>();
    if (choice == "none") {
      r->tool_choice = OpenAiRequest::ToolChoice::kNone;
      return absl::OkStatus();
    }
    if (choice != "auto" && choice != "required") {
      return ParamError("tool_choice",
                        StrCat("'tool_choice' is '", choice.substr(0, 40),
                               "'; expected 'none', 'auto', 'required' or "
                               "{\"type\": \"function\", \"function\": {\"name\": ...}}"));
    }
    // "auto" without tools asks for nothing (vLLM accepts it too); forcing a call does.
    if (choice == "auto") return absl::OkStatus();
    if (!has_tools) {
      return ParamError("tool_choice",
                        StrCat("'tool_choice' '", choice, "' needs 'tools' to choose from"));
    }
    r->tool_choice = OpenAiRequest::ToolChoice::kRequired;
  } else if (v->is_object()) {
    const Json* function = Find(*v, "function");
    if (function == nullptr || !function->is_object()) {
      return ParamError("tool_choice.function",
                        "'tool_choice.function' must be an object with the function's 'name'");
    }
    const Json* name = Find(*function, "name");
    if (name == nullptr || !name->is_string()) {
      return ParamError("tool_choice.function.name",
                        "'tool_choice.function.name' must be a string");
    }
    if (const Json* type = Find(*v, "type"); type != nullptr && *type != "function") {
      return ParamError("tool_choice.type", "'tool_choice.type' must be 'function'");
    }
    r->tool_choice_name = name->get<std::string>();
    if (ToolNamed(*r, r->tool_choice_name) == nullptr) {
      return ParamError(
          "tool_choice.function.name",
          StrCat("'tool_choice.function.name' is '", r->tool_choice_name.substr(0, 64),
                 "', which is not among the request's 'tools'"));
    }
    r->tool_choice = OpenAiRequest::ToolChoice::kNamed;
  } else {
    return TypeError("tool_choice", "a string or an object", *v);
  }
  if (r->tool_choice != OpenAiRequest::ToolChoice::kRequired &&
      r->tool_choice != OpenAiRequest::ToolChoice::kNamed) {
    return absl::OkStatus();
  }
  if (r->constraint != OpenAiRequest::Constraint::kNone) {
    return ParamError("response_format",
                      "'response_format' cannot be combined with a forced 'tool_choice': the "
                      "output is the tool calls");
  }
  r->constraint = OpenAiRequest::Constraint::kJsonSchema;
  r->constraint_schema = ToolCallsSchema(*r);
  return CheckCompiles(r->constraint_schema, r->tool_choice == OpenAiRequest::ToolChoice::kNamed
                                                 ? "tool_choice"
                                                 : "tools");
}

std::string ToolCallsSchema(const OpenAiRequest& r) {
  if (r.tool_choice == OpenAiRequest::ToolChoice::kNamed) {
    return DumpJson(ParametersOf(*ToolNamed(r, r.tool_choice_name)));
  }
  Json branches = Json::array();
  Json defs = Json::object();
  const Json& tools = r.chat.at("tools");
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& function = tools[i].at("function");
    Json parameters = ParametersOf(function);
    if (parameters.is_object()) {
      const std::string prefix = StrCat("tool", i, "_");
      RenameRefs(&parameters, prefix);
      for (std::string_view key : {"$defs", "definitions"}) {
        auto it = parameters.find(key);
        if (it == parameters.end() || !it->is_object()) continue;
        for (auto& [name, def] : it->items()) defs[StrCat(prefix, name)] = def;
        parameters.erase(it);
      }
    }
    Json name = Json::object();
    name["type"] = "string";
    name["enum"] = Json::array({function.at("name")});
    Json properties = Json::object();
    properties["name"] = std::move(name);
    properties["parameters"] = std::move(parameters);
    Json branch = Json::object();
    branch["type"] = "object";
    branch["properties"] = std::move(properties);
    branch["required"] = Json::array({"name", "parameters"});
    branch["additionalProperties"] = false;
    branches.push_back(std::move(branch));
  }
  Json schema = Json::object();
  schema["type"] = "array";
  schema["minItems"] = 1;
  if (!r.parallel_tool_calls) schema["maxItems"] = 1;
  schema["items"] = Json{{"anyOf", std::move(branches)}};
  if (!defs.empty()) schema["$defs"] = std::move(defs);
  return DumpJson(schema);
}

}  // namespace baton::frontdoor
