// Unit tests of the chat-template engine, construct by construct. Expected strings are what
// @huggingface/jinja renders (the oracle test checks real templates against it directly);
// tests marked "extension" cover what Baton accepts beyond it, with Python Jinja's results.
#include "template/chat_template.h"

#include <pthread.h>

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace baton::templating {
namespace {

using nlohmann::json;
using testing::HasSubstr;

constexpr TemplateDate kDate{2024, 7, 26, 9, 3};

absl::StatusOr<std::string> Render(std::string_view source, const json& context = json::object(),
                                   const TemplateLimits& limits = {}) {
  auto tmpl = ChatTemplate::Parse(source, limits);
  if (!tmpl.ok()) return tmpl.status();
  return tmpl->RenderWithContext(context, kDate);
}

// The output, or "<error: message>" so that expectations read as one string.
std::string Out(std::string_view source, const json& context = json::object(),
                const TemplateLimits& limits = {}) {
  absl::StatusOr<std::string> out = Render(source, context, limits);
  if (!out.ok()) return "<error: " + std::string(out.status().message()) + ">";
  return *out;
}

std::string Error(std::string_view source, const json& context = json::object(),
                  const TemplateLimits& limits = {}) {
  absl::StatusOr<std::string> out = Render(source, context, limits);
  if (out.ok()) return "<rendered: " + *out + ">";
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(out.status().message());
}

json Messages() {
  return R"([{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
             {"role": "assistant", "content": "yo"}, {"role": "user", "content": "bye"}])"_json;
}

TEST(ChatTemplateTest, TextAndExpressions) {
  EXPECT_EQ(Out("plain text"), "plain text");
  EXPECT_EQ(Out("{{ 'a' }}{{ \"b\" }}{{ 'c' 'd' }}"), "abcd");
  EXPECT_EQ(Out("{{ 'esc: \\n\\t\\\\ \\' \\x41 \\u00e9' }}"), "esc: \n\t\\ ' A \u00e9");
  EXPECT_EQ(Out("{{ name }}!", {{"name", "Ann"}}), "Ann!");
  EXPECT_EQ(Out("[{{ missing }}][{{ none }}]"), "[][]");
  EXPECT_EQ(Out("{{ true }} {{ False }} {{ None }}"), "true false ");
  // One trailing newline of the source is dropped, as Jinja does by default.
  EXPECT_EQ(Out("x\n"), "x");
  EXPECT_EQ(Out("x\n\n"), "x\n");
}

TEST(ChatTemplateTest, NumbersPrintLikeJavaScript) {
  EXPECT_EQ(Out("{{ 1 }}|{{ 1.0 }}|{{ 1.5 }}|{{ -0.0 }}|{{ 10 / 4 }}|{{ 10 / 5 }}"),
            "1|1.0|1.5|-0.0|2.5|2.0");
  EXPECT_EQ(
      Out("{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 2 ** 10 }}|{{ 2 ** -1 }}|{{ -2 ** 2 }}"),
      "3|-4|-1|1024|0.5|4");
  EXPECT_EQ(Out("{{ 0.1 + 0.2 }}|{{ 1 / 3 }}|{{ 1 / 0 }}|{{ 0.0000001 }}"),
            "0.30000000000000004|0.3333333333333333|Infinity|1e-7");
  EXPECT_EQ(Out("{{ 1000000 * 1000000 * 1000000 * 1000 }}"), "1e+21");
  // Integral JSON numbers are integers, whatever their JSON spelling.
  EXPECT_EQ(Out("{{ a }}|{{ b }}|{{ a + b }}", {{"a", 2.0}, {"b", 0.5}}), "2|0.5|2.5");
}

TEST(ChatTemplateTest, WhitespaceControl) {
  EXPECT_EQ(Out("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(Out("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(Out("a {#- comment -#} b"), "ab");
  EXPECT_EQ(Out("a {# comment #} b"), "a  b");
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: indentation before one.
  EXPECT_EQ(Out("a\n{% if true %}\nb\n{% endif %}\nc"), "a\nb\nc");
  EXPECT_EQ(Out("  {% if true %}\n    x\n  {% endif %}\n  {{ 'y' }}"), "    x\n  y");
  EXPECT_EQ(Out("{% for i in [1, 2] %}\n- {{ i }}\n{% endfor %}"), "- 1\n- 2\n");
  // transformers' {% generation %} markers are dropped.
  EXPECT_EQ(Out("{% generation %}gen{% endgeneration %}"), "gen");
}

TEST(ChatTemplateTest, IfElifElse) {
  const char* src = "{% if x > 2 %}big{% elif x > 1 %}mid{% else %}small{% endif %}";
  EXPECT_EQ(Out(src, {{"x", 3}}), "big");
  EXPECT_EQ(Out(src, {{"x", 2}}), "mid");
  EXPECT_EQ(Out(src, {{"x", 0}}), "small");
  EXPECT_EQ(Out("{% if not x is defined %}u{% endif %}"), "u");
  EXPECT_EQ(Out("{% if [] or {} or '' or 0 or none %}t{% else %}f{% endif %}"), "f");
}

TEST(ChatTemplateTest, ForLoops) {
  json ctx = {{"messages", Messages()}};
  EXPECT_EQ(Out("{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
                ctx),
            "1043truefalse4;2132falsefalse4;3221falsefalse4;4310falsetrue4;");
  EXPECT_EQ(Out("{% for m in messages %}{{ loop.previtem.role }}>{{ loop.nextitem.role }} "
                "{% endfor %}",
                ctx),
            ">user system>assistant user>user assistant> ");
  EXPECT_EQ(Out("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(Out("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}@{{ loop.index }} {% endfor %}"),
            "2@1 4@2 ");
  EXPECT_EQ(Out("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"),
            "a=1;b=2;");
  EXPECT_EQ(Out("{% for k, v in {'a': 1} | items %}{{ k }}{{ v }}{% endfor %}"), "a1");
  EXPECT_EQ(Out("{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}"), "ab");
  EXPECT_EQ(Out("{% for m in messages | selectattr('role', 'equalto', 'user') %}{{ m.content }} "
                "{% endfor %}",
                ctx),
            "hi bye ");
  EXPECT_EQ(Out("{% for m in messages[::-1] %}{{ m.role[0] }}{% endfor %}", ctx), "uaus");
  EXPECT_EQ(Out("{% for i in range(3) %}{% for j in range(i) %}{{ j }}{% endfor %}|{% endfor %}"),
            "|0|01|");
}

TEST(ChatTemplateTest, BreakAndContinue) {
  EXPECT_EQ(
      Out("{% for x in [1, 2, 3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}"),
      "13");
  // As in @huggingface/jinja, output of the iteration that breaks is dropped.
  EXPECT_EQ(Out("{% for x in [1, 2, 3] %}{{ x }}{% if x == 2 %}{% break %}{% endif %}{% endfor %}"),
            "1");
  EXPECT_THAT(Error("{% break %}"), HasSubstr("'break' outside of a for loop"));
}

TEST(ChatTemplateTest, SetAndScopes) {
  EXPECT_EQ(Out("{% set x = 1 %}{% set x = x + 1 %}{{ x }}"), "2");
  EXPECT_EQ(Out("{% set a, b = 1, 'two' %}{{ a }}{{ b }}"), "1two");
  EXPECT_EQ(Out("{% set s %}block {{ 1 + 1 }}{% endset %}[{{ s }}]"), "[block 2]");
  // Assignments inside a loop stay inside it; inside an if they do not.
  EXPECT_EQ(Out("{% set a = 'x' %}{% for i in [1] %}{% set a = 'loop' %}{% endfor %}{{ a }}"), "x");
  EXPECT_EQ(Out("{% set a = 'x' %}{% if true %}{% set a = 'if' %}{% endif %}{{ a }}"), "if");
}

TEST(ChatTemplateTest, Namespace) {
  EXPECT_EQ(Out("{% set ns = namespace(total=0, seen=false) %}"
                "{% for i in [1, 2, 3] %}{% set ns.total = ns.total + i %}{% endfor %}"
                "{{ ns.total }} {{ ns.seen }} {{ ns }}"),
            "6 false {\"total\": 6, \"seen\": false}");
  EXPECT_EQ(Out("{{ namespace({'a': 1}, b=2).b }}"), "2");
  EXPECT_THAT(Error("{% set x = {} %}{% set x.y = 1 %}"),
              HasSubstr("cannot assign attribute on non-namespace object"));
}

TEST(ChatTemplateTest, Macros) {
  const char* greet =
      "{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}";
  EXPECT_EQ(Out(std::string(greet) + "{{ greet('Bob') }} {{ greet('Al', 'Hi') }} "
                                     "{{ greet(greeting='Yo', name='Cy') }}"),
            "Hello, Bob! Hi, Al! Yo, Cy!");
  EXPECT_EQ(
      Out("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"),
      "321");
  EXPECT_EQ(Out("{% macro m() %}{{ kwargs }}{{ varargs }}{% endmacro %}{{ m(1, 2, a=3) }}"),
            "{\"a\": 3}[1, 2]");
  EXPECT_EQ(Out("{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% call wrap() %}in{% endcall %}"),
            "[in]");
  EXPECT_EQ(Out("{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
                "{% call(v) each([1, 2]) %}<{{ v }}>{% endcall %}"),
            "<1><2>");
  // Macros resolve free names in the caller's scope, as in @huggingface/jinja.
  EXPECT_EQ(Out("{% set x = 1 %}{% macro f() %}{{ x }}{% endmacro %}{% for x in [5] %}{{ f() }}{% "
                "endfor %}"),
            "5");
  EXPECT_THAT(Error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
              HasSubstr("macro 'm' takes not more than 1 argument(s)"));
  EXPECT_THAT(Error("{% macro m(a) %}{% endmacro %}{{ m(b=1) }}"),
              HasSubstr("macro 'm' takes no keyword argument 'b'"));
}

TEST(ChatTemplateTest, FilterBlock) {
  EXPECT_EQ(Out("{% filter upper %}shout {{ 'x' }}{% endfilter %}"), "SHOUT X");
  EXPECT_EQ(Out("{% set s %}{% filter trim %}  padded  {% endfilter %}{% endset %}[{{ s }}]"),
            "[padded]");
}

TEST(ChatTemplateTest, RaiseException) {
  absl::StatusOr<std::string> out = Render("a{{ raise_exception('Roles must alternate ' ~ 2) }}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "Roles must alternate 2");
  EXPECT_TRUE(IsTemplateException(out.status()));
  EXPECT_FALSE(IsTemplateException(Render("{{ 1 + none }}").status()));
}

TEST(ChatTemplateTest, StrftimeNow) {
  EXPECT_EQ(Out("{{ strftime_now('%d %b %Y|%B|%m/%d %H:%M|%%|%e') }}"),
            "26 Jul 2024|July|07/26 09:03|%|%e");
  // Without an injected date, today's.
  auto tmpl = ChatTemplate::Parse("{{ strftime_now('%Y') }}");
  ASSERT_TRUE(tmpl.ok());
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  auto out = tmpl->RenderWithContext(json::object());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, std::to_string(local.tm_year + 1900));
}

TEST(ChatTemplateTest, Operators) {
  EXPECT_EQ(
      Out("{{ 'a' + 1 }}|{{ 1 + 'a' }}|{{ 'a' ~ 2.5 }}|{{ 'a' ~ true }}|{{ 'x' + [1, 2.0] }}"),
      "a1|1a|a2.5|atrue|x1,2.0");
  EXPECT_EQ(Out("{{ [1] + [2, 3] }}|{{ (1 + 2) * 3 }}|{{ 10 - 2 - 3 }}|{{ 2 ** 3 ** 2 }}"),
            "[1, 2, 3]|9|5|64");
  EXPECT_EQ(Out("{{ 1 == 1.0 }}{{ '1' == 1 }}{{ none == missing }}{{ [1] == [1] }}"),
            "truetruetruefalse");
  EXPECT_EQ(Out("{{ 1 in [1, 2] }}{{ 'a' in 'cat' }}{{ 'k' in {'k': 1} }}{{ 3 not in [1] }}"
                "{{ 'x' in missing }}"),
            "truetruetruetruefalse");
  EXPECT_EQ(Out("{{ true and 'yes' }}|{{ false or 'no' }}|{{ not 0 }}|{{ 0 and 1 }}"),
            "yes|no|true|0");
  EXPECT_EQ(Out("{{ 'a' if x else 'b' }}|{{ 'a' if false else 'b' if true else 'c' }}|[{{ 'a' if "
                "false }}]",
                {{"x", 1}}),
            "a|b|[]");
  EXPECT_THAT(Error("{{ 1 + none }}"), HasSubstr("Cannot perform operation + on null values"));
  EXPECT_THAT(Error("{{ 'a' ~ missing }}"), HasSubstr("on undefined values"));
}

TEST(ChatTemplateTest, MemberAccessAndSlicing) {
  json ctx = {{"messages", Messages()}, {"d", {{"a", {{"b", "c"}}}, {"items", 5}}}};
  EXPECT_EQ(
      Out("{{ messages[0].role }}|{{ messages.1.content }}|{{ messages[-1]['content'] }}", ctx),
      "system|hi|bye");
  EXPECT_EQ(
      Out("{{ d.a.b }}|{{ d['a']['b'] }}|{{ d.items }}|{{ d.nope }}|{{ d.nope.deeper }}", ctx),
      "c|c|5||");
  EXPECT_EQ(
      Out("{{ 'hello'[1] }}|{{ 'hello'[-1] }}|{{ 'hello'[1:3] }}|{{ 'hello'[::-1] }}|{{ 'h'[5] }}"),
      "e|o|el|olleh|");
  EXPECT_EQ(
      Out("{{ [1, 2, 3, 4][1:] }}|{{ [1, 2, 3, 4][:-1] }}|{{ [1, 2, 3, 4][::2] }}|{{ [1][5] }}"),
      "[2, 3, 4]|[1, 2, 3]|[1, 3]|");
  EXPECT_EQ(Out("{{ messages | length }}{{ messages.length }}{{ 'abc'.length }}", ctx), "443");
}

TEST(ChatTemplateTest, Tests) {
  EXPECT_EQ(Out("{{ x is defined }}{{ x is undefined }}{{ none is none }}{{ 1 is number }}"
                "{{ 1.5 is integer }}{{ 's' is string }}{{ true is boolean }}{{ false is false }}"
                "{{ true is true }}"),
            "falsetruetruetruefalsetruetruetruetrue");
  EXPECT_EQ(
      Out("{{ [1] is iterable }}{{ 's' is iterable }}{{ {'a': 1} is iterable }}"
          "{{ {'a': 1} is mapping }}{{ [1] is sequence }}{{ 3 is odd }}{{ 4 is even }}"
          "{{ 'ABC' is upper }}{{ 'abc' is lower }}{{ range is callable }}{{ 1 is not none }}"),
      "truetruefalsetruetruetruetruetruetruetruetrue");
  // Tests with arguments (extension: the reference only has argument-free tests).
  EXPECT_EQ(Out("{{ 9 is divisibleby(3) }}{{ 2 is equalto(2) }}{{ 'a' is in(['a']) }}"),
            "truetruetrue");
  EXPECT_THAT(Error("{{ 1 is frobnicated }}"), HasSubstr("unsupported test 'frobnicated'"));
}

TEST(ChatTemplateTest, StringFilters) {
  EXPECT_EQ(Out("{{ '  hi  ' | trim }}|{{ 'hello world' | title }}|{{ 'hELLO' | capitalize }}|"
                "{{ 'Ab' | upper }}{{ 'Ab' | lower }}|{{ 'h\u00e9\U0001F600' | length }}"),
            "hi|Hello World|HELLO|ABab|4");
  EXPECT_EQ(Out("{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}"),
            "a\n    b\n\n    c|  a\n  b");
  EXPECT_EQ(Out("{{ 'aXbX' | replace('X', 'y') }}|{{ 'aaa' | replace('a', 'b', count=2) }}"),
            "ayby|bba");
  EXPECT_EQ(Out("{{ '42x' | int }}|{{ 'x' | int }}|{{ 'x' | int(7) }}|{{ '2.5e1' | float }}|{{ 5.7 "
                "| int }}"),
            "42|0|7|25.0|5");
  EXPECT_EQ(Out("{{ 'abc' | join('-') }}|{{ 's' | string }}|{{ 's' | safe }}"), "a-b-c|s|s");
}

TEST(ChatTemplateTest, ListFilters) {
  EXPECT_EQ(Out("{{ [3, 1, 2] | sort }}|{{ ['b', 'A', 'c'] | sort }}|{{ [3, 1, 2] | "
                "sort(reverse=true) }}"),
            "[1, 2, 3]|[\"A\", \"b\", \"c\"]|[3, 2, 1]");
  EXPECT_EQ(
      Out("{{ [{'n': 2}, {'n': 1}] | sort(attribute='n') | map(attribute='n') | join(',') }}"),
      "1,2");
  EXPECT_EQ(Out("{{ [1, 2, 3] | first }}{{ [1, 2, 3] | last }}{{ [1, 2, 3] | reverse }}{{ [1, 2] | "
                "length }}"),
            "13[3, 2, 1]2");
  EXPECT_EQ(Out("{{ [1, 2, 1, '1'] | unique }}|{{ ['a', 'b'] | join(', ') }}|{{ [1, none, true] | "
                "join('-') }}"),
            "[1, 2, \"1\"]|a, b|1--true");
  EXPECT_EQ(Out("{{ [1, 'a'] | string }}|{{ (1, 2) | list | length }}"), "[1, \"a\"]|2");
  json ctx = {{"messages", Messages()}};
  EXPECT_EQ(Out("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | "
                "join(',') }}|"
                "{{ messages | rejectattr('role', 'equalto', 'user') | list | length }}|"
                "{{ messages | map(attribute='missing', default='-') | join }}",
                ctx),
            "hi,bye|2|----");
}

TEST(ChatTemplateTest, DictFiltersAndMethods) {
  EXPECT_EQ(
      Out("{{ {'b': 1, 'a': 2} | items }}|{{ {'b': 1, 'a': 2} | dictsort }}|"
          "{{ {'b': 1, 'a': 2} | dictsort(by='value', reverse=true) }}|{{ {'b': 1} | length }}"),
      "[[\"b\", 1], [\"a\", 2]]|[[\"a\", 2], [\"b\", 1]]|[[\"a\", 2], [\"b\", 1]]|1");
  EXPECT_EQ(Out("{{ d.keys() }}{{ d.values() }}{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 7) }}",
                {{"d", {{"a", 1}}}}),
            "[\"a\"][1]17");
}

TEST(ChatTemplateTest, DefaultFilter) {
  EXPECT_EQ(Out("{{ x | default('d') }}|{{ none | default('d') }}|{{ '' | default('d', true) }}|"
                "{{ 0 | default('d', boolean=true) }}|{{ 'v' | default('d') }}"),
            "d||d|d|v");
  // Extension: `d` and the bare form, as in Python Jinja.
  EXPECT_EQ(Out("[{{ x | d('d') }}][{{ x | default }}]"), "[d][]");
}

TEST(ChatTemplateTest, ToJson) {
  json ctx = {{"v", R"({"b": [1, "x", null, true, 1.5, {}], "a": "\u00e9\ud83d\ude00"})"_json}};
  // nlohmann::json keeps object keys sorted, so "a" comes first here.
  EXPECT_EQ(Out("{{ v | tojson }}", ctx),
            "{\"a\": \"\u00e9\U0001F600\", \"b\": [1, \"x\", null, true, 1.5, {}]}");
  EXPECT_EQ(Out("{{ v.b | tojson(indent=2) }}", ctx),
            "[\n  1,\n  \"x\",\n  null,\n  true,\n  1.5,\n  {}\n]");
  EXPECT_EQ(Out("{{ v.a | tojson(ensure_ascii=true) }}", ctx), "\"\\u00e9\\ud83d\\ude00\"");
  EXPECT_EQ(Out("{{ {'a': 1, 'b': 2} | tojson(separators=(',', ':')) }}"), "{\"a\":1,\"b\":2}");
  EXPECT_EQ(Out("{{ {'k': 1.0} | tojson }}|{{ missing | tojson }}|{{ '\\u0001\"' | tojson }}"),
            "{\"k\": 1}|null|\"\\u0001\\\"\"");
  // Keys that look like array indexes come first, as in a JavaScript object.
  EXPECT_EQ(Out("{{ v | tojson }}", {{"v", {{"10", 1}, {"2", 2}, {"a", 3}}}}),
            "{\"2\": 2, \"10\": 1, \"a\": 3}");
  EXPECT_THAT(Error("{{ (1, 2) | tojson }}"), HasSubstr("Cannot convert to JSON: TupleValue"));
}

TEST(ChatTemplateTest, StringMethods) {
  EXPECT_EQ(Out("{{ 'a-b-c'.split('-') }}|{{ 'a-b-c'.split('-', 1) }}|{{ '  a  b '.split() }}"),
            "[\"a\", \"b\", \"c\"]|[\"a\", \"b-c\"]|[\"a\", \"b\"]");
  EXPECT_EQ(Out("{{ 'abc'.startswith('a') }}{{ 'abc'.endswith(('x', 'c')) }}{{ ' x '.strip() }}"
                "{{ 'xAy'.upper() }}{{ 'XaY'.lower() }}{{ 'ab cd'.title() }}"),
            "truetruexXAYxayAb Cd");
  // As in @huggingface/jinja, strip's argument is ignored: all whitespace goes.
  EXPECT_EQ(Out("[{{ '\\n x \\n'.strip('\\n') }}][{{ '\\n\\nx'.lstrip('\\n') }}][{{ 'x "
                "\\n'.rstrip() }}]"),
            "[x][x][x]");
  EXPECT_EQ(Out("{{ 'a.b'.replace('.', '/') }}"), "a/b");
  // Extensions: find, count, join, format.
  EXPECT_EQ(Out("{{ 'hello'.find('l') }}{{ 'hello'.find('z') }}{{ 'hello'.count('l') }}"
                "{{ ', '.join(['a', 'b']) }}|{{ '{} and {name}'.format(1, name='x') }}"),
            "2-12a, b|1 and x");
}

TEST(ChatTemplateTest, ListAppendExtension) {
  EXPECT_EQ(Out("{% set xs = [] %}{% for i in range(3) %}{% set _ = xs.append(i * i) %}{% endfor "
                "%}{{ xs }}"),
            "[0, 1, 4]");
  // A list that contains itself is freed after the render (LeakSanitizer checks this).
  EXPECT_EQ(Out("{% set xs = [] %}{% set _ = xs.append(xs) %}{{ xs | length }}"), "1");
  EXPECT_THAT(Error("{% set xs = [] %}{% set _ = xs.append(xs) %}{{ xs }}"), HasSubstr("nesting"));
}

TEST(ChatTemplateTest, ExtensionFilters) {
  EXPECT_EQ(
      Out("{{ 2.5 | round }}|{{ 3.14159 | round(2) }}|{{ 2.1 | round(0, 'ceil') }}|{{ -3 | abs }}"),
      "2.0|3.14|3.0|3");
  EXPECT_EQ(Out("{{ [1, 2, 3.5] | sum }}|{{ [{'p': 2}, {'p': 3}] | sum(attribute='p') }}|"
                "{{ [3, 1, 2] | min }}|{{ ['b', 'A'] | max }}"),
            "6.5|5|1|b");
  EXPECT_EQ(Out("{{ [1, 2, 3] | batch(2) | list }}|{{ [1, 2, 3] | batch(2, 0) | last }}"),
            "[[1, 2], [3]]|[3, 0]");
  EXPECT_EQ(Out("{{ '<b>Hi</b>  <!-- c -->there &amp; you' | striptags }}|{{ 'one two, three' | "
                "wordcount }}"),
            "Hi there & you|3");
  EXPECT_EQ(Out("{{ '<a href=\"x\">&</a>' | escape }}|{{ 'abc' | count }}|{{ 'abc' | first }}{{ "
                "'abc' | last }}"),
            "&lt;a href=&#34;x&#34;&gt;&amp;&lt;/a&gt;|3|ac");
  EXPECT_EQ(
      Out("{{ [1, 2, 3, 4] | select('odd') | list }}|{{ [1, 2, 3, 4] | reject('odd') | list }}|"
          "{{ ['A', 'a', 'b'] | unique(case_sensitive=false) | list }}|{{ 'ab' | list }}"),
      "[1, 3]|[2, 4]|[\"A\", \"b\"]|[\"a\", \"b\"]");
  EXPECT_EQ(Out("{{ '  x  ' | trim('x ') }}|{{ 'ab' | reverse }}|{{ 'x' * 3 }}|{{ 'b' > 'a' }}"),
            "|ba|xxx|true");
}

TEST(ChatTemplateTest, UnsupportedConstructsAreNamed) {
  EXPECT_EQ(Error("line 1\n{{ text | wordwrap(10) }}", {{"text", "t"}}),
            "chat template: unsupported filter 'wordwrap' at line 2");
  EXPECT_EQ(Error("{% raw %}x{% endraw %}"),
            "chat template: syntax error: unsupported statement 'raw' at line 1");
  EXPECT_THAT(Error("{{ x.nope() }}", {{"x", "s"}}), HasSubstr("unsupported method 'nope'"));
  EXPECT_THAT(Error("{{ nope() }}"), HasSubstr("unknown function 'nope'"));
  EXPECT_THAT(Error("{{ 'a' | trim | frobnicate }}"), HasSubstr("unsupported filter 'frobnicate'"));
  EXPECT_THAT(Error("{{ 1 | trim }}"),
              HasSubstr("filter 'trim' cannot be applied to IntegerValue"));
}

TEST(ChatTemplateTest, SyntaxErrorsNameTheLine) {
  EXPECT_THAT(Error("ok\n\n{% if %}"), HasSubstr("at line 3"));
  EXPECT_THAT(Error("{% for x in [1] %}no end"), HasSubstr("syntax error"));
  EXPECT_THAT(Error("{{ 'unterminated }}"), HasSubstr("Unexpected end of input"));
  EXPECT_THAT(Error("{{ 1 + }}"), HasSubstr("syntax error"));
  EXPECT_THAT(Error("{% endif %}"), HasSubstr("unsupported statement 'endif'"));
  EXPECT_THAT(Error("{{ 'x' \xE2\x82\xAC }}"), HasSubstr("Unexpected character"));
}

TEST(ChatTemplateTest, LimitsAreEnforced) {
  TemplateLimits small;
  small.max_output_bytes = 100;
  EXPECT_THAT(Error("{% for i in range(50) %}abcd{% endfor %}", json::object(), small),
              HasSubstr("max_output_bytes (100)"));
  EXPECT_THAT(Error("{% set s = 'x' %}{% for i in range(20) %}{% set s = s ~ s %}{% endfor %}",
                    json::object(), small),
              HasSubstr("max_output_bytes"));
  // Bounds count what is built, not a worst case.
  EXPECT_EQ(Out("{{ s.replace('a', 'bb') | length }}|{{ s | indent(200) | length }}",
                {{"s", std::string(80, 'x') + "a" + std::string(5, '\n')}}, small),
            "87|86");
  EXPECT_THAT(Error("{{ s.replace('x', 'yy') }}", {{"s", std::string(60, 'x')}}, small),
              HasSubstr("max_output_bytes"));
  small.max_loop_iterations = 10;
  EXPECT_THAT(Error("{% for i in range(11) %}{% endfor %}", json::object(), small),
              HasSubstr("max_loop_iterations (10)"));
  EXPECT_THAT(
      Error("{% for i in [1, 2, 3] %}{% for j in [1, 2, 3] %}{% for k in [1, 2] %}{% endfor %}"
            "{% endfor %}{% endfor %}",
            json::object(), small),
      HasSubstr("max_loop_iterations"));
  small.max_recursion_depth = 5;
  EXPECT_THAT(
      Error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", json::object(), small),
      HasSubstr("max_recursion_depth (5)"));
  small.max_source_bytes = 8;
  EXPECT_THAT(ChatTemplate::Parse("0123456789", small).status().message(),
              HasSubstr("max_source_bytes (8)"));
  // Unbounded recursion stops at the default limit too.
  EXPECT_THAT(Error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"),
              HasSubstr("max_recursion_depth (64)"));
}

TEST(ChatTemplateTest, DeepSyntaxIsRejected) {
  std::string parens = std::string(5000, '(') + "1" + std::string(5000, ')');
  EXPECT_THAT(Error("{{ " + parens + " }}"), HasSubstr("nesting"));
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
  EXPECT_THAT(Error(ifs), HasSubstr("nesting"));
  std::string sum = "{{ 1";
  for (int i = 0; i < 5000; ++i) sum += " + 1";
  EXPECT_THAT(Error(sum + " }}"), HasSubstr("nesting"));
}

TEST(ChatTemplateTest, DeepEvaluationIsBounded) {
  // A deep (but allowed) expression inside deep recursion hits the evaluation bound.
  std::string deep = "n";
  for (int i = 0; i < 400; ++i) deep += " + 0";
  EXPECT_THAT(Error("{% macro f(n) %}{{ f(" + deep + " + 1) }}{% endmacro %}{{ f(0) }}"),
              HasSubstr("nested deeper"));
}

TEST(ChatTemplateTest, DeepEvaluationThroughFiltersIsBounded) {
  // The heaviest frames: filter arguments that are filter calls, with recursion at the
  // bottom. The evaluation bound must trip before the stack runs out (also under ASan).
  std::string nested = "f(n + 1)";
  for (int i = 0; i < 45; ++i) nested = "'b' | replace('a', " + nested + ")";
  EXPECT_THAT(Error("{% macro f(n) %}{{ " + nested + " }}{% endmacro %}{{ f(0) }}"),
              HasSubstr("nested deeper"));
}

TEST(ChatTemplateTest, SmallThreadStacksAreRespected) {
  // A server thread may have far less stack than the main thread: the bound adapts.
  struct Job {
    std::string source;
    std::string error;
  } job;
  job.source = "f(n + 1)";
  for (int i = 0; i < 45; ++i) job.source = "'b' | replace('a', " + job.source + ")";
  job.source = "{% macro f(n) %}{{ " + job.source + " }}{% endmacro %}{{ f(0) }}";
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 1 << 20);
  pthread_t thread;
  ASSERT_EQ(pthread_create(
                &thread, &attr,
                [](void* arg) -> void* {
                  auto* j = static_cast<Job*>(arg);
                  j->error = Error(j->source);
                  return nullptr;
                },
                &job),
            0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  EXPECT_THAT(job.error, HasSubstr("nested deeper"));
}

TEST(ChatTemplateTest, DeepValuesAreFreedWithoutRecursion) {
  // Structures built at run time may nest deeply; printing them is bounded, freeing them
  // must not recurse.
  TemplateLimits limits;
  limits.max_loop_iterations = 1 << 22;
  EXPECT_EQ(Out("{% set x = [] %}{% for i in range(60000) %}{% set x = [x] %}{% endfor %}ok",
                json::object(), limits),
            "ok");
  EXPECT_THAT(
      Error("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}"
            "{% endfor %}{{ ns.x }}"),
      HasSubstr("nesting"));
  // The `loop` object may be kept past its iteration.
  EXPECT_EQ(Out("{% set ns = namespace(l=none) %}{% for i in [1, 2] %}{% if loop.first %}"
                "{% set ns.l = loop %}{% endif %}{% endfor %}{{ ns.l.index }}"),
            "1");
}

TEST(ChatTemplateTest, RenderBuildsTheChatContext) {
  auto tmpl = ChatTemplate::Parse(
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
      "{% if tools is not none %}tools={{ tools | length }}{% endif %}"
      "{% if add_generation_prompt %}[assistant:{% endif %}{{ eos_token }}{{ flavour }}");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  ChatInputs inputs;
  inputs.messages = R"([{"role": "user", "content": "hi"}])"_json;
  inputs.bos_token = "<s>";
  inputs.eos_token = "</s>";
  inputs.extra = {{"flavour", "!"}};
  EXPECT_EQ(tmpl->Render(inputs).value_or("<error>"), "<s>[user:hi][assistant:</s>!");
  inputs.add_generation_prompt = false;
  inputs.tools = json::array({{{"type", "function"}}});
  EXPECT_EQ(tmpl->Render(inputs).value_or("<error>"), "<s>[user:hi]tools=1</s>!");

  auto context = MakeChatContext(inputs);
  ASSERT_TRUE(context.ok());
  EXPECT_EQ((*context)["bos_token"], "<s>");
  EXPECT_EQ((*context)["flavour"], "!");

  inputs.extra = {{"messages", 1}};
  EXPECT_THAT(tmpl->Render(inputs).status().message(), HasSubstr("'messages' collides"));
  inputs.extra = json::object();
  inputs.messages = "not a list";
  EXPECT_THAT(tmpl->Render(inputs).status().message(), HasSubstr("messages must be a JSON array"));
}

TEST(ChatTemplateTest, RenderWithContextRejectsBadContexts) {
  auto tmpl = ChatTemplate::Parse("{{ x }}");
  ASSERT_TRUE(tmpl.ok());
  EXPECT_THAT(tmpl->RenderWithContext(json::array()).status().message(),
              HasSubstr("must be a JSON object"));
  EXPECT_THAT(tmpl->RenderWithContext({{"none", 1}}).status().message(),
              HasSubstr("redefine a built-in"));
  json deep = json::parse(std::string(2000, '[') + std::string(2000, ']'));
  EXPECT_THAT(tmpl->RenderWithContext({{"x", deep}}).status().message(), HasSubstr("nesting"));
}

TEST(ChatTemplateTest, OrderedJsonKeepsKeyOrder) {
  auto tmpl = ChatTemplate::Parse(
      "{{ tools[0] | tojson }}|{% for k in tools[0].function %}{{ k }},{% endfor %}");
  ASSERT_TRUE(tmpl.ok());
  const char* tools =
      R"({"tools": [{"type": "function", "function": {"name": "f", "description": "d"}}]})";
  EXPECT_EQ(
      tmpl->RenderWithOrderedContext(nlohmann::ordered_json::parse(tools)).value_or("<error>"),
      "{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": "
      "\"d\"}}|name,description,");
  EXPECT_EQ(tmpl->RenderWithContext(json::parse(tools)).value_or("<error>"),
            "{\"function\": {\"description\": \"d\", \"name\": \"f\"}, \"type\": "
            "\"function\"}|description,name,");
}

TEST(ChatTemplateTest, FromTokenizerConfig) {
  auto plain = ChatTemplate::FromTokenizerConfig({{"chat_template", "A{{ 1 }}"}});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->RenderWithContext(json::object()).value_or(""), "A1");
  EXPECT_FALSE(plain->has_tool_use_template());

  json config = {{"chat_template",
                  {{{"name", "default"}, {"template", "default"}},
                   {{"name", "tool_use"}, {"template", "tools:{{ tools | length }}"}},
                   {{"name", "rag"}, {"template", "rag"}}}}};
  auto chosen = ChatTemplate::FromTokenizerConfig(config);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_TRUE(chosen->has_tool_use_template());
  ChatInputs inputs;
  EXPECT_EQ(chosen->Render(inputs).value_or(""), "default");
  inputs.tools = json::array({1, 2});
  EXPECT_EQ(chosen->Render(inputs).value_or(""), "tools:2");

  auto rag = ChatTemplate::FromTokenizerConfig(config, "rag");
  ASSERT_TRUE(rag.ok());
  EXPECT_EQ(rag->Render(inputs).value_or(""), "rag");
  EXPECT_EQ(ChatTemplate::FromTokenizerConfig(config, "nope").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ChatTemplate::FromTokenizerConfig(json::object()).status().code(),
            absl::StatusCode::kNotFound);
  json no_default = {
      {"chat_template", {{{"name", "a"}, {"template", "a"}}, {{"name", "b"}, {"template", "b"}}}}};
  EXPECT_THAT(ChatTemplate::FromTokenizerConfig(no_default).status().message(),
              HasSubstr("no 'default'"));
  EXPECT_EQ(ChatTemplate::FromTokenizerConfig({{"chat_template", 5}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ChatTemplate::FromTokenizerConfig({{"chat_template", {{{"name", 1}}}}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ChatTemplate::FromTokenizerConfig(json::array()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, Llama31BuiltinToolsUseRejectExtension) {
  // Llama 3.1 filters builtin_tools with reject('equalto', ...), which @huggingface/jinja
  // lacks; Baton renders it as Python Jinja (and transformers) do.
  auto out = Render(
      "{{- 'Tools: ' + builtin_tools | reject('equalto', 'code_interpreter') | join(', ') }}",
      {{"builtin_tools", {"brave_search", "code_interpreter", "wolfram_alpha"}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "Tools: brave_search, wolfram_alpha");
}

TEST(ChatTemplateTest, CopiesShareTheTemplateAndRenderConcurrently) {
  auto tmpl = ChatTemplate::Parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}"
      "{{ ns.n }}:{{ messages | map(attribute='content') | join(',') }}");
  ASSERT_TRUE(tmpl.ok());
  ChatTemplate copy = *tmpl;
  EXPECT_EQ(&copy.source(), &tmpl->source());
  std::vector<std::thread> threads;
  std::vector<std::string> outputs(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      ChatInputs inputs;
      for (int i = 0; i <= t; ++i)
        inputs.messages.push_back({{"role", "user"}, {"content", std::to_string(i)}});
      for (int rep = 0; rep < 50; ++rep) outputs[t] = copy.Render(inputs).value_or("<error>");
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(outputs[0], "1:0");
  EXPECT_EQ(outputs[7], "8:0,1,2,3,4,5,6,7");
}

}  // namespace
}  // namespace baton::templating
