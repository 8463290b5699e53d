// Oracle test: every real chat template in testdata/chat_templates is rendered with a set
// of conversations by Baton and by @huggingface/jinja (tests/oracle/render_template.mjs,
// run with node), and the outputs must be byte-identical; where the reference throws,
// Baton must return an error too.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "template/chat_template.h"

namespace baton::templating {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr TemplateDate kNow{2025, 3, 9, 14, 5};

fs::path TemplatesDir() { return fs::path(BATON_TESTDATA_DIR) / "chat_templates"; }
fs::path OracleScript() { return fs::path(BATON_SOURCE_DIR) / "tests/oracle/render_template.mjs"; }

// Why the oracle cannot run here, or "" when it can.
std::string OracleUnavailableReason(bool needs_testdata = true) {
  if (needs_testdata && !fs::is_directory(TemplatesDir())) {
    return "testdata not found at " + TemplatesDir().string();
  }
  FILE* probe = popen("node --version 2>/dev/null", "r");
  std::string version;
  if (probe != nullptr) {
    char buf[64];
    while (fgets(buf, sizeof(buf), probe) != nullptr) version += buf;
    pclose(probe);
  }
  if (version.empty()) return "node is not on PATH";
  fs::path package = fs::path(BATON_SOURCE_DIR) / "tests/oracle/node_modules/@huggingface/jinja";
  if (!fs::is_directory(package)) {
    return "@huggingface/jinja is not installed in tests/oracle/node_modules (npm install there)";
  }
  return "";
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct OracleResult {
  bool ok = false;
  std::string output;
  std::string error;
};

// Runs one batch through node. Fails the test on infrastructure errors.
std::vector<OracleResult> RunOracle(const json& requests) {
  char path[] = "/tmp/baton_oracle_XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  if (fd < 0) return {};
  const std::string payload = json{{"requests", requests}}.dump();
  EXPECT_EQ(write(fd, payload.data(), payload.size()), static_cast<ssize_t>(payload.size()));
  close(fd);
  const std::string command = "node '" + OracleScript().string() + "' < '" + path + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  if (pipe != nullptr) {
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
    pclose(pipe);
  }
  unlink(path);
  json parsed = json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.contains("results") ||
      parsed["results"].size() != requests.size()) {
    ADD_FAILURE() << "oracle run failed: " << out.substr(0, 2000);
    return {};
  }
  std::vector<OracleResult> results;
  for (const json& r : parsed["results"]) {
    OracleResult result;
    result.ok = r.value("ok", false);
    result.output = r.value("output", "");
    result.error = r.value("error", "");
    results.push_back(std::move(result));
  }
  return results;
}

struct Conversation {
  std::string name;
  ChatInputs inputs;
};

json WeatherTools() {
  return R"([
    {"type": "function", "function": {
      "name": "get_weather",
      "description": "Get the current weather in a city.",
      "parameters": {"type": "object",
        "properties": {
          "city": {"type": "string", "description": "City name, e.g. Paris"},
          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"}},
        "required": ["city"]}}},
    {"type": "function", "function": {
      "name": "lookup_stock",
      "description": "Look up a stock price.",
      "parameters": {"type": "object",
        "properties": {
          "ticker": {"type": "string", "description": " Ticker symbol "},
          "days": {"type": "integer", "description": "How many days of history"},
          "ratio": {"type": "number", "description": "A ratio"},
          "exact": {"type": "boolean", "description": "Exact match"}},
        "required": ["ticker", "days"]}}}
  ])"_json;
}

// A tool whose parameters use arrays, nested objects and type unions.
json RichTools() {
  return R"([
    {"type": "function", "function": {
      "name": "search",
      "description": "Search the web.",
      "parameters": {"type": "object",
        "properties": {
          "query": {"type": "string", "description": "What to look for"},
          "filters": {"type": "array", "items": {"type": "string"}, "description": "Filters"},
          "weights": {"type": "object", "additionalProperties": {"type": "number"}, "description": "Weights"},
          "mode": {"type": ["string", "null"], "description": "Mode"}},
        "required": ["query"]}}}
  ])"_json;
}

json ToolCallTurns(const json& arguments, const json& assistant_content) {
  json call_message = {
      {"role", "assistant"},
      {"content", assistant_content},
      {"tool_calls",
       json::array({{{"id", "call12345"},
                     {"type", "function"},
                     {"function", {{"name", "get_weather"}, {"arguments", arguments}}}}})}};
  return json::array({
      {{"role", "system"}, {"content", "You are a weather bot."}},
      {{"role", "user"}, {"content", "What's the weather in Paris?"}},
      call_message,
      {{"role", "tool"},
       {"tool_call_id", "call12345"},
       {"name", "get_weather"},
       {"content", "{\"temperature\": 21, \"unit\": \"celsius\"}"}},
      {{"role", "assistant"}, {"content", "It is 21\u00b0C in Paris."}},
      {{"role", "user"}, {"content", "Thanks!"}},
  });
}

std::vector<Conversation> Conversations() {
  std::vector<Conversation> out;
  auto add = [&](std::string name, json messages, bool add_generation_prompt, json tools = nullptr,
                 json extra = json::object(), std::string bos = "<s>", std::string eos = "</s>") {
    Conversation c;
    c.name = std::move(name);
    c.inputs.messages = std::move(messages);
    c.inputs.add_generation_prompt = add_generation_prompt;
    c.inputs.tools = std::move(tools);
    c.inputs.extra = std::move(extra);
    c.inputs.bos_token = std::move(bos);
    c.inputs.eos_token = std::move(eos);
    c.inputs.now = kNow;
    out.push_back(std::move(c));
  };

  const json single = R"([{"role": "user", "content": "Hello!"}])"_json;
  const json with_system = R"([
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "4."},
    {"role": "user", "content": "And 3+3?"}])"_json;
  const json ends_with_assistant = R"([
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello! How can I help?"},
    {"role": "user", "content": "Tell me a joke."},
    {"role": "assistant", "content": "Why did the chicken cross the road?"}])"_json;
  const json tricky_text = json::array({
      {{"role", "system"}, {"content", "  Be terse.\n"}},
      {{"role", "user"},
       {"content",
        "  \u00dcn\u00efc\u00f6d\u00e9 \u2713 \U0001F600 \"quotes\" 'single' {braces} "
        "{{ not jinja }} {% raw %} <tags> \\ back\n\n"}},
      {{"role", "assistant"},
       {"content", "<think>\nLet me think.\n</think>\n\nSure: \"ok\" \U0001F600"}},
      {{"role", "user"}, {"content", "Thanks\t!"}},
  });
  const json parallel = R"([
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call00001", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
      {"id": "call00002", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
    {"role": "tool", "tool_call_id": "call00001", "name": "get_weather", "content": "18"},
    {"role": "tool", "tool_call_id": "call00002", "name": "get_weather", "content": "24"}])"_json;
  const json structured_tool_result = R"([
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "tool_calls": [
      {"id": "abcdefghi", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
    {"role": "tool", "tool_call_id": "abcdefghi", "content": {"content": {"temperature": -3, "sky": "clear"}}}])"_json;
  const json reasoning = R"([
    {"role": "user", "content": "Solve x+1=2."},
    {"role": "assistant", "content": "x = 1.", "reasoning_content": "Subtract one from both sides."},
    {"role": "user", "content": "And x+2=5?"}])"_json;

  // Each message sequence plain, and again with tools plus the variables some templates
  // need (firefunction's `functions` and `datetime`).
  const json tool_extra = {{"functions", WeatherTools().dump(2)}, {"datetime", "2025-03-09 14:05"}};
  const std::vector<std::pair<std::string, json>> sequences = {
      {"single_user", single},
      {"system_multi_turn", with_system},
      {"ends_with_assistant", ends_with_assistant},
      {"tricky_text", tricky_text},
      {"empty_messages", json::array()},
      {"roles_not_alternating",
       R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])"_json},
      {"system_only", R"([{"role": "system", "content": "Only a system prompt."}])"_json},
      {"call_object_args_null_content",
       ToolCallTurns({{"city", "Paris"}, {"unit", "celsius"}}, nullptr)},
      {"call_object_args_empty_content", ToolCallTurns({{"city", "Paris"}}, "")},
      {"call_string_args", ToolCallTurns("{\"city\": \"Paris\", \"unit\": \"celsius\"}", nullptr)},
      {"call_string_args_with_content", ToolCallTurns("{\"city\": \"Paris\"}", "Let me check.")},
      {"parallel_calls", parallel},
      {"structured_tool_result", structured_tool_result},
      {"reasoning_content", reasoning},
  };
  bool prompt = true;
  for (const auto& [name, messages] : sequences) {
    add(name, messages, true);
    add(name + "_no_prompt", messages, false);
    add(name + "_with_tools", messages, prompt, WeatherTools(), tool_extra);
    prompt = !prompt;
  }

  add("no_special_tokens", tricky_text, true, nullptr, json::object(), "", "");
  add("no_special_tokens_with_tools", with_system, false, WeatherTools(), tool_extra, "", "");
  add("enable_thinking_false", single, true, nullptr, {{"enable_thinking", false}});
  add("enable_thinking_true", reasoning, true, nullptr, {{"enable_thinking", true}});
  add("date_string", with_system, true, nullptr, {{"date_string", "01 Jan 2030"}});
  add("tools_in_system_message", with_system, true, WeatherTools(),
      {{"tools_in_user_message", false}});
  add("tools_rich_schema", single, true, RichTools(), tool_extra);
  add("tools_empty_list", single, true, json::array(), tool_extra);
  json old_style_tools = R"([
    {"name": "internet_search", "description": "Returns a list of relevant document snippets.",
     "parameter_definitions": {"query": {"description": "Query to search the internet with", "type": "str", "required": true},
                               "top_k": {"description": "How many results", "type": "int", "required": false}}}])"_json;
  add("tools_old_style_definitions", single, true, old_style_tools);
  json code_interpreter = WeatherTools();
  code_interpreter.push_back({{"type", "code_interpreter"}});
  add("tools_code_interpreter", single, true, code_interpreter, tool_extra);
  return out;
}

std::string FirstDifference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  auto around = [&](const std::string& s) {
    size_t from = i > 60 ? i - 60 : 0;
    return json(s.substr(from, 140)).dump();
  };
  return "first difference at byte " + std::to_string(i) + "\n  want: " + around(want) +
         "\n  got:  " + around(got);
}

// Small templates that exercise one construct or quirk each, rendered against one shared
// context. `extension` marks constructs the reference rejects and Baton accepts.
struct Snippet {
  const char* source;
  bool extension;
};

const Snippet kSnippets[] = {
    {R"JINJA({{ 'a' }}{{ "b" }}{{ 'c' 'd' }})JINJA", false},
    {R"JINJA({{ "esc: \n\t\\ \' \" \x41 \u00e9" }})JINJA", false},
    {R"JINJA({{ 1 }}|{{ 1.0 }}|{{ 1.5 }}|{{ -0.0 }}|{{ 10 / 4 }}|{{ 10 // 4 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 7 % -3 }}|{{ 2 ** 10 }}|{{ 2 ** -1 }}|{{ 2.0 ** 2 }})JINJA",
     false},
    {R"JINJA({{ 1 / 3 }}|{{ 0.1 + 0.2 }}|{{ 123456789012345678901234 }}|{{ 1000000 * 1000000 * 1000000 * 1000 }}|{{ 1.5 * 1000000000000000000000 }}|{{ 0.000001 }}|{{ 0.0000001 }}|{{ 1 / 0 }}|{{ 3 * 1.0 }}|{{ 5.5 | int }}|{{ -5.5|int }}|{{ "42abc"|int }}|{{ "x"|int }}|{{ "3.25e2x"|float }}|{{ 7|float }})JINJA",
     false},
    {R"JINJA({{ true }}|{{ false }}|{{ none }}|{{ True }}|{{ None }}|{{ undefined_thing }}|{{ [1, "a", none, true, 2.5] }}|{{ {"a": 1, "b": [1, 2]} }})JINJA",
     false},
    {R"JINJA({{ "a" + 1 }}|{{ 1 + "a" }}|{{ "a" + 1.0 }}|{{ "a" ~ 2.5 }}|{{ "a" ~ true }}|{{ "x" + [1, 2.0, "s"] }}|{{ "x" + {"a": 1} }}|{{ [1] + [2, 3] }})JINJA",
     false},
    {R"JINJA({{ 1 == 1.0 }}|{{ "1" == 1 }}|{{ true == 1 }}|{{ none == undefined_var }}|{{ [1] == [1] }}|{{ "a" == ["a"] }}|{{ "1,2" == [1, 2] }}|{{ 0 == "" }}|{{ "" == [] }})JINJA",
     false},
    {R"JINJA({{ 1 in [1, 2] }}|{{ "1" in [1, 2] }}|{{ "a" in "cat" }}|{{ "k" in {"k": 1} }}|{{ "z" not in {"k": 1} }}|{{ 3 not in [1] }}|{{ "x" in undefined_var }}|{{ "x" not in undefined_var }})JINJA",
     false},
    {R"JINJA({% if x is defined %}d{% else %}u{% endif %}|{{ none is none }}|{{ 1 is number }}|{{ 1.5 is integer }}|{{ "s" is string }}|{{ [1] is iterable }}|{{ {"a": 1} is iterable }}|{{ {"a": 1} is mapping }}|{{ "ABC" is upper }}|{{ "abc" is lower }}|{{ 3 is odd }}|{{ 4 is even }}|{{ true is boolean }}|{{ false is false }}|{{ x is undefined }}|{{ range is callable }}|{{ [1] is sequence }}|{{ "s" is not none }})JINJA",
     false},
    {R"JINJA({{ "  hi  " | trim }}|{{ "hello world" | title }}|{{ "hELLO wORLD" | title }}|{{ "hello" | capitalize }}|{{ "hELLO" | capitalize }}|{{ "Ab" | upper }}{{ "Ab" | lower }}|{{ "abc" | length }}|{{ "héllo😀" | length }})JINJA",
     false},
    {R"JINJA({{ [3, 1, 2] | sort }}|{{ ["b", "A", "c"] | sort }}|{{ [3, 1, 2] | sort(reverse=true) }}|{{ ["b", "A", "c"] | sort(case_sensitive=true) }}|{{ [{"n": 2}, {"n": 1}] | sort(attribute="n") }}|{{ [1, 2, 3] | reverse }}|{{ [1, 2, 3] | first }}|{{ [1, 2, 3] | last }}|{{ [1, 2, 3] | length }})JINJA",
     false},
    {R"JINJA({{ [1, 2, 1, "1", 1.0] | unique }}|{{ ["a", "b"] | join }}|{{ ["a", "b"] | join(", ") }}|{{ [1, none, true, 2.5, [1, 2]] | join("-") }}|{{ "abc" | join("-") }}|{{ [1, 2] | string }}|{{ 5 | string }}|{{ 5.0 | string }}|{{ true | string }}|{{ "x" | string }})JINJA",
     false},
    {R"JINJA({{ {"b": 1, "a": 2} | items }}|{{ {"b": 1, "a": 2} | dictsort }}|{{ {"b": 1, "a": 2} | dictsort(by="value") }}|{{ {"b": 1, "a": 2} | dictsort(reverse=true) }}|{{ {"b": 1, "a": 2} | length }}|{{ {"b": 1, "a": 2}.keys() }}|{{ {"b": 1}.values() }}|{{ {"b": 1}.get("b") }}|{{ {"b": 1}.get("c") }}|{{ {"b": 1}.get("c", 7) }})JINJA",
     false},
    {R"JINJA({{ x | default("dflt") }}|{{ none | default("dflt") }}|{{ "" | default("dflt", true) }}|{{ 0 | default("dflt", boolean=true) }}|{{ "v" | default("dflt") }})JINJA",
     false},
    {R"JINJA({{ {"a": [1, "x", none, true, 1.5, {"b": {}}, []]} | tojson }}|{{ {"a": [1, {"b": 2}], "c": {}} | tojson(indent=2) }}|{{ "é😀\u007f" | tojson }}|{{ "é😀\u007f" | tojson(ensure_ascii=true) }}|{{ {"a": 1, "b": 2} | tojson(separators=(",", ":")) }}|{{ x | tojson }}|{{ "\u0001\b\f" | tojson }})JINJA",
     false},
    {R"JINJA({{ {"b": 1, "a": 2, "B": 3, "_c": 4, "1": 5} | tojson(sort_keys=true) }})JINJA",
     false},
    {R"JINJA({{ tools | tojson(indent=4) }})JINJA", false},
    {R"JINJA({{ "a-b-c" .split("-") }}|{{ "a-b-c".split("-", 1) }}|{{ "  a  b c ".split() }}|{{ "  a  b c ".split(none, 1) }}|{{ "a,b,".split(",") }}|{{ "abc".startswith("a") }}|{{ "abc".endswith(("x", "c")) }}|{{ " x ".strip() }}|{{ "\n\nx\n".lstrip("\n") }}|{{ "x\n\n".rstrip() }}|{{ "aXbX".replace("X", "y") }}|{{ "aXbX".replace("X", "y", 1) }}|{{ "ab" | replace("", "-") }}|{{ "aaa" | replace("a", "b", count=2) }})JINJA",
     false},
    {R"JINJA({{ "hello"[1] }}|{{ "hello"[-1] }}|{{ "hello"[1:3] }}|{{ "hello"[::-1] }}|{{ "hello"[10] }}|{{ [1, 2, 3, 4][1:] }}|{{ [1, 2, 3, 4][:-1] }}|{{ [1, 2, 3, 4][::2] }}|{{ [1, 2, 3, 4][::-2] }}|{{ [1, 2, 3][-1] }}|{{ [1, 2, 3][5] }}|{{ messages[0].role }}|{{ messages.0.content }}|{{ messages[-1]["content"] }}|{{ "😀x"[0] }})JINJA",
     false},
    {R"JINJA({% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }}/{{ loop.previtem.role }}/{{ loop.nextitem.role }};{% endfor %})JINJA",
     false},
    {R"JINJA({% for x in [] %}a{% else %}empty{% endfor %}|{% for x in [1, 2, 3] if x != 2 %}{{ x }}{{ loop.index }}{% endfor %}|{% for k, v in {"a": 1, "b": 2}.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in {"a": 1, "b": 2} %}{{ k }}{% endfor %})JINJA",
     false},
    {R"JINJA({% for x in [1, 2, 3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}|{% for x in [1, 2, 3] %}{{ x }}{% if x == 2 %}{% break %}{% endif %}{% endfor %}|{% for x in [1] %}{% continue %}{% else %}E{% endfor %})JINJA",
     false},
    {R"JINJA({% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}|{% for i in range(3) %}{{ i }}{% endfor %}|{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}|{% for i in range(5, 0, -2) %}{{ i }}{% endfor %}|{{ range(3) }})JINJA",
     false},
    {R"JINJA({% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}|{% set ns = namespace(t=0) %}{% for i in [1, 2, 3] %}{% set ns.t = ns.t + i %}{% endfor %}{{ ns.t }}|{{ ns }})JINJA",
     false},
    {R"JINJA({% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set t = (1, 2) %}{{ t | length }}|{% set s %}block {{ 1 + 1 }}{% endset %}[{{ s }}]|{% filter upper %}shout {{ "x" }}{% endfilter %}|{% filter length %}abcd{% endfilter %})JINJA",
     false},
    {R"JINJA({% macro greet(name, greeting="Hello") %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet("Bob") }}|{{ greet("Al", "Hi") }}|{{ greet(name="Cy", greeting="Yo") }}|{{ greet() }})JINJA",
     false},
    {R"JINJA({% macro m() %}{{ kwargs }}|{{ varargs }}{% endmacro %}{{ m(1, 2, a=3) }})JINJA",
     false},
    {R"JINJA({% macro outer() %}[{{ caller() }}]{% endmacro %}{% call outer() %}inside{% endcall %}|{% macro list(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) list([1, 2]) %}<{{ x }}>{% endcall %})JINJA",
     false},
    {R"JINJA({% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(4) }})JINJA",
     false},
    {R"JINJA({% macro show() %}{{ v }}{% endmacro %}{% set v = "outer" %}{{ show() }}{% for v in ["loop"] %}{{ show() }}{% endfor %})JINJA",
     false},
    {R"JINJA({{ "a" if true else "b" }}|{{ "a" if false else "b" if true else "c" }}|{{ "a" if false }}|[{{ x if x }}]|{{ not true }}|{{ not x is defined }}|{{ true and "yes" }}|{{ false or "fallback" }}|{{ [] or "empty" }}|{{ 0 and 1 }})JINJA",
     false},
    {R"JINJA({{ -(x|default(3)) }}|{{ -(2) }}|{{ - 2 }}|{{ +3 }}|{{ 2 - -1 }}|{{ [1,-1] }}|{{ -true }}|{{ (1 + 2) * 3 }}|{{ 2 * 3 ** 2 }}|{{ 2 ** 3 ** 2 }}|{{ 10 - 2 - 3 }}|{{ 1 < 2 }}{{ 2 <= 2 }}{{ 3 > 4 }}{{ 1 != 1 }})JINJA",
     false},
    {R"JINJA({{ messages | selectattr("role", "equalto", "user") | list | length }}|{{ messages | rejectattr("role", "equalto", "user") | map(attribute="role") | join(",") }}|{{ messages | selectattr("missing") | list }}|{{ messages | map(attribute="nope") | list }}|{{ messages | map(attribute="nope", default="d") | list }}|{{ [{"a": {"b": 1}}] | map(attribute="a.b") | list }})JINJA", false},
    {R"JINJA({{ "text\nmore\n\nend" | indent }}|{{ "text\nmore\n\nend" | indent(2, true) }}|{{ "text\nmore\n\nend" | indent(width=1, first=true, blank=true) }}|{{ -5 | abs }}|{{ -5.5 | abs }}|{{ true | int }}|{{ 3 | float }}|{{ "s" | safe }})JINJA",
     false},
    {R"JINJA({%- if true -%}   a   {%- endif -%}   b   {{- " c " -}}   d)JINJA", false},
    {R"JINJA(  {% if true %}
    x
  {% endif %}
  {# comment #}
  y
  {{ "expr" }}
	{% if true %}tab{% endif %}
)JINJA",
     false},
    {R"JINJA(line1
{%- for i in [1, 2] %}
  item {{ i }}
{%- endfor %}
end
{% for i in [1, 2] -%}
  {{ i }}
{% endfor -%}
x{#
  multi-line comment #}
{% set y = 1 %}
{{ y }}
  {%- if true -%}
   z
  {%- endif %}
)JINJA",
     false},
    {R"JINJA(a-}
b%}
c#}
d  {-e
)JINJA",
     false},
    {R"JINJA(text {{- "
" }} {%- if true %}

kept{% endif %}


)JINJA",
     false},
    {R"JINJA({% generation %}gen{% endgeneration %} | {%- generation -%}  t  {%- endgeneration -%} |)JINJA",
     false},
    {R"JINJA({{ x.y.z }}|{{ none.y }}|{{ (1).x }}|{{ "s".nope }}|{{ [1].length }}|{{ "abc".length }}|{{ {"items": 5}.items }}|{{ {"a": 1}.items is defined }})JINJA",
     false},
    {R"JINJA({{ namespace(a=1, b=2) }}|{{ namespace({"x": 1}) }}|{{ namespace([["k", "v"]]).k }})JINJA",
     false},
    {R"JINJA({% set d = {"a": 1} %}{% set d2 = d %}{{ d == d2 }}|{{ d == {"a": 1} }}|{% set l = [d] %}{{ d in l }}|{{ {"a": 1} in l }})JINJA",
     false},
    {R"JINJA({{ messages[0] == messages[0] }}|{{ messages[1:] | length }}|{{ (messages | selectattr("role", "equalto", "user") | list)[-1] == messages[-1] }})JINJA",
     false},
    {R"JINJA({{ raise_exception("custom failure " ~ 42) }})JINJA", false},
    {R"JINJA({% if %})JINJA", false},
    {R"JINJA({{ 1 + }})JINJA", false},
    {R"JINJA({% for x in %}{% endfor %})JINJA", false},
    {R"JINJA({% for x in [1] %})JINJA", false},
    {R"JINJA({{ "unterminated }})JINJA", false},
    {R"JINJA({% endif %})JINJA", false},
    {R"JINJA({{ x | nonexistent_filter }})JINJA", false},
    {R"JINJA({{ "s" | trim(1) }})JINJA", false},
    {R"JINJA({{ 1 is nonexistent_test }})JINJA", false},
    {R"JINJA({{ undefined_fn() }})JINJA", false},
    {R"JINJA({{ "a" - 1 }})JINJA", false},
    {R"JINJA({{ [1] | sum }})JINJA", true},
    {R"JINJA({{ (1, 2) }})JINJA", false},
    {R"JINJA({{ (1, 2) | tojson }})JINJA", false},
    {R"JINJA({% for a, b in [(1, 2)] %}{{ a }}{% endfor %})JINJA", false},
    {R"JINJA({% for x in "abc" %}{{ x }}{% endfor %})JINJA", false},
    {R"JINJA({{ 1 + none }})JINJA", false},
    {R"JINJA({% set x.y = 1 %})JINJA", false},
    {R"JINJA({{ 1 if true else }})JINJA", false},
    {R"JINJA({% break %})JINJA", false},
    {R"JINJA({{ {"a": 1}["a"] }}|{{ {"a": 1}.a }}|{{ {"a-b": 1}["a-b"] }}|{{ [[1, 2], [3]][0][1] }}|{{ {"a": {"b": "c"}}.a.b }})JINJA",
     false},
    {R"JINJA({{ strftime_now("%Y-%m-%d %H:%M %b %B %%Y %e") }})JINJA", false},
    {R"JINJA({{ loop }})JINJA", false},
    {R"JINJA({{ {1: 2} }})JINJA", false},
    {R"JINJA({{ [1, 2, 3] | batch(2) | list }})JINJA", true},
    {R"JINJA({{ x.foo() }})JINJA", false},
    {R"JINJA({{- 'x' -}}{#- c -#}  {{- 'y' }})JINJA", false},
    {R"JINJA(a {# c -#}   b {#- c #} c)JINJA", false},
    {R"JINJA({%- set x = 5 -%}   {{ x }})JINJA", false},
    {R"JINJA({{ "{{" }}{{ '}}' }}{{ {'a': {'b': 1}} }})JINJA", false},
    {R"JINJA({% set o = {'a': {'b': 1}}%}{{ o.a.b }})JINJA", false},
    {R"JINJA({{ messages|length is odd }})JINJA", false},
    {R"JINJA({{ 4 is divisibleby(2) }}{{ 5 is not divisibleby(2) }})JINJA", true},
    {R"JINJA({{ 'abc' | list }})JINJA", true},
    {R"JINJA({{ 'x' * 3 }})JINJA", true},
    {R"JINJA({{ 1e3 }})JINJA", false},
    {"a\r\n  {% if true %}\r\nx\r\n  {% endif %}\r\ny\r  {%- if true %} z{% endif %}", false},
    {"a\xE2\x80\xA8  {% if true %}b{% endif %}\xE2\x80\xA9\t{# c #}d", false},
    {"{{\xC2\xA0'nbsp'\xE3\x80\x80}}|{{ '\\ud83d\\ude00' }}|{{ '\\ud83d' | length }}", false},
    {"x  {%- generation -%}  y  {% endgeneration %}  z {%generation%}w{%endgeneration-%}\n v",
     false},
    {"{{ 'a' }}{#-\n x -#}\n  b {#- only #}", false},
    {"{% for x in [1, 2] -%}\n  {{ x }}\n{%- endfor %}\n", false},
    {R"JINJA({{ "%}
" }}|{{ "a" ~ "
" }})JINJA",
     false},
    {R"JINJA({% for m in messages %}{% if loop.index0 == 1 %}{% break %}{% endif %}{{ m.role }}{% endfor %}|{% macro stop() %}{% break %}{% endmacro %}{% for i in [1, 2] %}{{ i }}{{ stop() }}{% endfor %}|{% for i in [1, 2] %}{% for j in [3, 4] %}{{ i }}{{ j }}{% if j == 3 %}{% break %}{% endif %}{% endfor %}{% endfor %})JINJA",
     false},
    {R"JINJA({% set x = [1, 2, 3] %}{{ x | selectattr("a") | list }})JINJA", false},
    {R"JINJA({{ [{"a": 1}, {"a": 0}, {"b": 1}] | selectattr("a") | list }}|{{ [{"a": 1}, {"a": 0}, {"b": 1}] | rejectattr("a") | list }}|{{ [{"a": 1}, {"a": 2}] | selectattr("a", "odd") | list }}|{{ [{"a": "x"}] | selectattr("a", "defined") | list }})JINJA",
     false},
    {R"JINJA({% macro m(a, b=a ~ "!") %}{{ a }}{{ b }}{% endmacro %}{{ m("x") }}|{{ m(1, 2) }}|{{ m(b=3, a=4) }})JINJA",
     false},
    {R"JINJA({% macro m(a, b) %}{% endmacro %}{{ m(1, 2, 3) }})JINJA", false},
    {R"JINJA({% raw %}{{ x }}{% endraw %})JINJA", false},
    {R"JINJA({% macro m(a) %}{{ a }}{% endmacro %}{{ m(b=1) }})JINJA", false},
    {R"JINJA({{ "%d %b %Y"|length }}{{ strftime_now("%d %b %Y") }}{{ strftime_now("%B %m %H%M") }})JINJA",
     false},
    {R"JINJA({{ {"a": none, "b": undefined_var, "c": [undefined_var]} }}|{{ {"a": none, "b": undefined_var} | tojson }}|{{ [undefined_var] | string }})JINJA",
     false},
    {R"JINJA({{ "A" < "b" }})JINJA", true},
    {R"JINJA({% set a = "x" %}{% if true %}{% set a = "y" %}{% endif %}{{ a }}|{% for i in [1] %}{% set a = "z" %}{% endfor %}{{ a }})JINJA",
     false},
    {R"JINJA({{ "Ab Cd" | wordcount }})JINJA", true},
    {R"JINJA({{ [1, 2] | map(attribute="x") | list }})JINJA", false},
    {R"JINJA({{ messages | map("upper") | list }})JINJA", false},
    {R"JINJA({{ [] | first }})JINJA", false},
    {R"JINJA({{ [] | last }})JINJA", false},
    {R"JINJA({{ "b" > "a" }})JINJA", true},
};

json SnippetContext() {
  return {{"messages",
           R"([{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
               {"role": "assistant", "content": "yo"}, {"role": "user", "content": "bye"}])"_json},
          {"tools", WeatherTools()},
          {"bos_token", "<s>"}};
}

TEST(ChatTemplateOracleSnippets, MatchHuggingFaceJinja) {
  const std::string reason = OracleUnavailableReason(/*needs_testdata=*/false);
  if (!reason.empty()) GTEST_SKIP() << "oracle unavailable: " << reason;
  const json context = SnippetContext();
  json requests = json::array();
  for (const Snippet& snippet : kSnippets) {
    requests.push_back({{"template", snippet.source},
                        {"context", context},
                        {"now",
                         {{"year", kNow.year},
                          {"month", kNow.month},
                          {"day", kNow.day},
                          {"hour", kNow.hour},
                          {"minute", kNow.minute}}}});
  }
  std::vector<OracleResult> oracle = RunOracle(requests);
  ASSERT_EQ(oracle.size(), std::size(kSnippets));
  int matched = 0;
  for (size_t i = 0; i < std::size(kSnippets); ++i) {
    const Snippet& snippet = kSnippets[i];
    SCOPED_TRACE(std::string("snippet: ") + snippet.source);
    absl::StatusOr<std::string> ours = absl::InternalError("not parsed");
    if (auto tmpl = ChatTemplate::Parse(snippet.source); tmpl.ok()) {
      ours = tmpl->RenderWithContext(context, kNow);
    } else {
      ours = tmpl.status();
    }
    if (snippet.extension) {
      EXPECT_FALSE(oracle[i].ok) << "no longer an extension: the reference renders "
                                 << oracle[i].output;
      EXPECT_TRUE(ours.ok()) << ours.status();
      ++matched;
    } else if (!oracle[i].ok) {
      EXPECT_FALSE(ours.ok()) << "the reference fails (" << oracle[i].error
                              << ") but Baton rendered: " << *ours;
      if (!ours.ok()) ++matched;
    } else if (!ours.ok()) {
      ADD_FAILURE() << "Baton failed: " << ours.status()
                    << "\nthe reference rendered: " << json(oracle[i].output).dump();
    } else if (*ours != oracle[i].output) {
      ADD_FAILURE() << FirstDifference(oracle[i].output, *ours);
    } else {
      ++matched;
    }
  }
  std::cout << "[ oracle   ] snippets: " << matched << "/" << std::size(kSnippets) << " match"
            << std::endl;
}

// The chat template as shipped in a real tokenizer_config.json, loaded the way the server
// loads it.
TEST(ChatTemplateOracle, TokenizerConfigTemplateMatches) {
  const std::string reason = OracleUnavailableReason();
  if (!reason.empty()) GTEST_SKIP() << "oracle unavailable: " << reason;
  const fs::path path = fs::path(BATON_TESTDATA_DIR) / "tokenizers/hf/llama3/tokenizer_config.json";
  json config = json::parse(ReadFile(path), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(config.is_discarded()) << path;
  auto tmpl = ChatTemplate::FromTokenizerConfig(config);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  ChatInputs inputs;
  inputs.messages =
      R"([{"role": "system", "content": "Be kind."}, {"role": "user", "content": " Hi "}])"_json;
  inputs.bos_token = config.value("bos_token", "");
  inputs.eos_token = config.value("eos_token", "");
  auto context = MakeChatContext(inputs);
  ASSERT_TRUE(context.ok());
  std::vector<OracleResult> oracle =
      RunOracle(json::array({{{"template", config["chat_template"]}, {"context", *context}}}));
  ASSERT_EQ(oracle.size(), 1u);
  ASSERT_TRUE(oracle[0].ok) << oracle[0].error;
  auto ours = tmpl->Render(inputs);
  ASSERT_TRUE(ours.ok()) << ours.status();
  EXPECT_EQ(*ours, oracle[0].output);
  EXPECT_EQ(*ours,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe kind.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

std::vector<std::string> TemplateNames() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(TemplatesDir(), ec)) {
    if (entry.path().extension() == ".jinja") names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(ChatTemplateOracle, TestdataHasTemplates) {
  if (!fs::is_directory(TemplatesDir())) {
    GTEST_SKIP() << "testdata not found at " << TemplatesDir();
  }
  EXPECT_GE(TemplateNames().size(), 16u);
}

class ChatTemplateOracleTest : public testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateOracleTest, MatchesHuggingFaceJinja) {
  const std::string reason = OracleUnavailableReason();
  if (!reason.empty()) GTEST_SKIP() << "oracle unavailable: " << reason;
  const std::string source = ReadFile(TemplatesDir() / GetParam());
  auto tmpl = ChatTemplate::Parse(source);

  std::vector<Conversation> conversations = Conversations();
  json requests = json::array();
  for (const Conversation& c : conversations) {
    auto context = MakeChatContext(c.inputs);
    ASSERT_TRUE(context.ok()) << context.status();
    requests.push_back({{"template", source},
                        {"context", *context},
                        {"now",
                         {{"year", kNow.year},
                          {"month", kNow.month},
                          {"day", kNow.day},
                          {"hour", kNow.hour},
                          {"minute", kNow.minute}}}});
  }
  std::vector<OracleResult> oracle = RunOracle(requests);
  ASSERT_EQ(oracle.size(), conversations.size());

  int matched = 0, both_failed = 0;
  for (size_t i = 0; i < conversations.size(); ++i) {
    const Conversation& c = conversations[i];
    SCOPED_TRACE(GetParam() + " / " + c.name);
    absl::StatusOr<std::string> ours =
        tmpl.ok() ? tmpl->Render(c.inputs) : absl::StatusOr<std::string>(tmpl.status());
    if (!oracle[i].ok) {
      EXPECT_FALSE(ours.ok()) << "the reference fails (" << oracle[i].error
                              << ") but Baton rendered:\n"
                              << *ours;
      if (!ours.ok()) {
        ++matched, ++both_failed;
        if (std::getenv("BATON_ORACLE_VERBOSE") != nullptr) {
          std::cout << "[ both fail] " << c.name << "\n    reference: " << oracle[i].error
                    << "\n    baton:     " << ours.status().message() << std::endl;
        }
      }
      continue;
    }
    if (!ours.ok()) {
      ADD_FAILURE() << "Baton failed: " << ours.status() << "\nthe reference rendered:\n"
                    << oracle[i].output;
      continue;
    }
    if (*ours == oracle[i].output) {
      ++matched;
    } else {
      ADD_FAILURE() << FirstDifference(oracle[i].output, *ours);
    }
  }
  std::cout << "[ oracle   ] " << GetParam() << ": " << matched << "/" << conversations.size()
            << " conversations match (" << both_failed << " fail in both)" << std::endl;
}

std::string ParamName(const testing::TestParamInfo<std::string>& info) {
  std::string name = info.param.substr(0, info.param.size() - 6);  // drop ".jinja"
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Templates, ChatTemplateOracleTest, testing::ValuesIn(TemplateNames()),
                         ParamName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ChatTemplateOracleTest);

}  // namespace
}  // namespace baton::templating
