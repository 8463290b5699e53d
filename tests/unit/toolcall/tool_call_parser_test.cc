#include "toolcall/tool_call_parser.h"

#include <chrono>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "common/utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::toolcall {

void PrintTo(const ToolCall& call, std::ostream* os) {
  *os << "{" << call.name << ", " << call.arguments << "}";
}
void PrintTo(const ParsedOutput& out, std::ostream* os) {
  *os << "content=\"" << out.content << "\" calls=[";
  for (const ToolCall& call : out.calls) {
    PrintTo(call, os);
    *os << " ";
  }
  *os << "]";
}

namespace {

ToolCall Call(std::string name, std::string arguments) {
  return ToolCall{std::move(name), std::move(arguments)};
}

// Rebuilds what a client sees from the deltas, checking OpenAI's shape on the way: each
// call's first delta has its name (and the next index), later ones only arguments; content
// deltas never split a UTF-8 character when the input is valid UTF-8.
class Assembler {
 public:
  explicit Assembler(bool check_utf8) : check_utf8_(check_utf8) {}

  void Add(const StreamDelta& delta) {
    if (check_utf8_) {
      EXPECT_TRUE(IsValidUtf8(delta.content)) << "split character";
    }
    out_.content += delta.content;
    for (const ToolCallDelta& call : delta.calls) {
      if (call.index == static_cast<int>(out_.calls.size())) {  // a new call
        EXPECT_FALSE(call.name.empty()) << "a call's first delta must carry its name";
        out_.calls.push_back(Call(call.name, call.arguments));
      } else {
        ASSERT_EQ(call.index + 1, static_cast<int>(out_.calls.size())) << "index out of order";
        EXPECT_TRUE(call.name.empty()) << "name repeated after the first delta";
        out_.calls.back().arguments += call.arguments;
      }
    }
  }
  const ParsedOutput& out() const { return out_; }

 private:
  bool check_utf8_;
  ParsedOutput out_;
};

ParsedOutput Stream(Format format, const std::vector<std::string_view>& fragments,
                    size_t max_held = ToolCallParser::kDefaultMaxHeldBytes) {
  auto parser = ToolCallParser::Create(format, max_held);
  Assembler assembler(/*check_utf8=*/false);
  for (std::string_view f : fragments) assembler.Add(parser->Feed(f));
  assembler.Add(parser->Finish());
  return assembler.out();
}

// Streams `text` split at every point, byte by byte, and in random pieces; each must give
// `expected`.
void ExpectStreamingAgrees(Format format, std::string_view text, const ParsedOutput& expected,
                           size_t max_held = ToolCallParser::kDefaultMaxHeldBytes) {
  for (size_t i = 0; i <= text.size(); ++i) {
    ParsedOutput got = Stream(format, {text.substr(0, i), text.substr(i)}, max_held);
    ASSERT_EQ(got, expected) << "split at " << i;
  }
  {
    auto parser = ToolCallParser::Create(format, max_held);
    Assembler assembler(/*check_utf8=*/IsValidUtf8(text));
    for (size_t i = 0; i < text.size(); ++i) assembler.Add(parser->Feed(text.substr(i, 1)));
    assembler.Add(parser->Finish());
    ASSERT_EQ(assembler.out(), expected) << "byte by byte";
  }
  std::mt19937 rng(static_cast<uint32_t>(text.size()));
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string_view> pieces;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t n = std::uniform_int_distribution<size_t>(0, 7)(rng);
      pieces.push_back(text.substr(pos, n));
      pos += std::min(n, text.size() - pos);
    }
    ASSERT_EQ(Stream(format, pieces, max_held), expected) << "random pieces, round " << round;
  }
}

struct Case {
  const char* label;
  Format format;
  std::string text;
  ParsedOutput expected;
};

// Unchanged: the text comes back as content and nothing else.
ParsedOutput Text(std::string text) { return ParsedOutput{std::move(text), {}}; }

const std::vector<Case>& Cases() {
  static const auto* cases = new std::vector<Case>{
      // Hermes 2 Pro / Hermes 3 / Qwen2.5 / Qwen3.
      {"hermes single",
       Format::kHermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
       "</tool_call>",
       {"", {Call("get_weather", R"({"city":"Paris"})")}}},
      {"hermes parallel",
       Format::kHermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
       "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": "
       "\"Europe/Paris\"}}\n</tool_call>\n",
       {"",
        {Call("get_weather", R"({"city":"Paris"})"),
         Call("get_time", R"({"tz":"Europe/Paris"})")}}},
      {"hermes content then call",
       Format::kHermes,
       "Let me check the weather.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
       "{\"city\": \"Paris\"}}\n</tool_call>",
       {"Let me check the weather.\n", {Call("get_weather", R"({"city":"Paris"})")}}},
      {"qwen3 think then call",
       Format::kHermes,
       "<think>\nThe user wants the weather, so call get_weather.\n</think>\n\n<tool_call>\n"
       "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
       {"<think>\nThe user wants the weather, so call get_weather.\n</think>\n\n",
        {Call("get_weather", R"({"city":"Paris"})")}}},
      {"hermes nested, markers and unicode in strings",
       Format::kHermes,
       R"(<tool_call>
{"name": "run", "arguments": {"code": "print(\"</tool_call>\")\n<tool_call>", "city": "Zürich 東京 🙂", "nested": {"a": [1, {"b": null}], "esc": "\u00e9\t"}}}
</tool_call>)",
       {"",
        {Call(
            "run",
            R"({"city":"Zürich 東京 🙂","code":"print(\"</tool_call>\")\n<tool_call>","nested":{"a":[1,{"b":null}],"esc":"é\t"}})")}}},
      {"hermes arguments as a string",
       Format::kHermes,
       R"(<tool_call>{"name": "f", "arguments": "{\"x\": [1, 2]}"}</tool_call>)",
       {"", {Call("f", R"({"x":[1,2]})")}}},
      {"hermes missing arguments",
       Format::kHermes,
       R"(<tool_call>{"name": "list_files"}</tool_call>)",
       {"", {Call("list_files", "{}")}}},
      {"hermes no call", Format::kHermes, "Use <tool or <tool_cal, 3 < 4 and </tool_call> alone.",
       Text("Use <tool or <tool_cal, 3 < 4 and </tool_call> alone.")},
      {"hermes bad json", Format::kHermes,
       "<tool_call>\n{\"name\": \"f\", \"arguments\": {]}\n</tool_call>",
       Text("<tool_call>\n{\"name\": \"f\", \"arguments\": {]}\n</tool_call>")},
      {"hermes missing name", Format::kHermes, R"(<tool_call>{"arguments": {}}</tool_call>)",
       Text(R"(<tool_call>{"arguments": {}}</tool_call>)")},
      {"hermes unterminated", Format::kHermes,
       "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n",
       Text("Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n")},
      {"hermes arguments not an object", Format::kHermes,
       R"(<tool_call>{"name": "f", "arguments": [1]}</tool_call>)",
       Text(R"(<tool_call>{"name": "f", "arguments": [1]}</tool_call>)")},
      {"hermes arguments string not an object", Format::kHermes,
       R"(<tool_call>{"name": "f", "arguments": "x"}</tool_call>)",
       Text(R"(<tool_call>{"name": "f", "arguments": "x"}</tool_call>)")},
      {"hermes valid then malformed",
       Format::kHermes,
       "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": 5}"
       "</tool_call>",
       {"\n<tool_call>{\"name\": 5}</tool_call>", {Call("a", "{}")}}},
      {"hermes malformed start then valid",
       Format::kHermes,
       "<tool_call><tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>",
       {"<tool_call>", {Call("a", "{}")}}},
      {"hermes whitespace only", Format::kHermes, "\n\n  ", Text("\n\n  ")},

      // Llama 3.1 / 3.2 / 3.3 JSON.
      {"llama single parameters",
       Format::kLlama3Json,
       R"({"name": "get_weather", "parameters": {"city": "Paris"}})",
       {"", {Call("get_weather", R"({"city":"Paris"})")}}},
      {"llama arguments key",
       Format::kLlama3Json,
       R"({"name": "get_weather", "arguments": {"city": "Paris"}})",
       {"", {Call("get_weather", R"({"city":"Paris"})")}}},
      {"llama python tag",
       Format::kLlama3Json,
       R"(<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}})",
       {"", {Call("get_weather", R"({"city":"Paris"})")}}},
      {"llama parallel",
       Format::kLlama3Json,
       R"({"name": "a", "parameters": {"x": 1}}; {"name": "b", "parameters": {"y": "; {"}})",
       {"", {Call("a", R"({"x":1})"), Call("b", R"({"y":"; {"})")}}},
      {"llama leading whitespace",
       Format::kLlama3Json,
       "\n\n {\"name\": \"f\", \"parameters\": {}}\n",
       {"", {Call("f", "{}")}}},
      {"llama builtin",
       Format::kLlama3Json,
       R"(<|python_tag|>brave_search.call(query="weather in \"Paris\"", count=3))",
       {"", {Call("brave_search", R"({"count":3,"query":"weather in \"Paris\""})")}}},
      {"llama builtin malformed", Format::kLlama3Json, "<|python_tag|>print(\"hi\")",
       Text("<|python_tag|>print(\"hi\")")},
      {"llama plain text", Format::kLlama3Json, "The answer is 42.", Text("The answer is 42.")},
      {"llama json that is not a call", Format::kLlama3Json, R"({"answer": 42})",
       Text(R"({"answer": 42})")},
      {"llama call followed by text", Format::kLlama3Json,
       R"({"name": "f", "parameters": {}} is what I would call.)",
       Text(R"({"name": "f", "parameters": {}} is what I would call.)")},
      {"llama text then json", Format::kLlama3Json, R"(Call this: {"name": "f", "parameters": {}})",
       Text(R"(Call this: {"name": "f", "parameters": {}})")},
      {"llama unterminated", Format::kLlama3Json, R"({"name": "f", "parameters": {"x": )",
       Text(R"({"name": "f", "parameters": {"x": )")},
      {"llama parameters as string",
       Format::kLlama3Json,
       R"({"name": "f", "parameters": "{\"q\": \"a\\nb\"}"})",
       {"", {Call("f", R"({"q":"a\nb"})")}}},

      // Mistral.
      {"mistral array",
       Format::kMistral,
       R"([TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1b2c3d4e"}])",
       {"", {Call("get_weather", R"({"city":"Paris"})")}}},
      {"mistral parallel",
       Format::kMistral,
       R"([TOOL_CALLS] [{"name": "a", "arguments": {"x": "[TOOL_CALLS]"}}, {"name": "b", "arguments": {}}])",
       {"", {Call("a", R"({"x":"[TOOL_CALLS]"})"), Call("b", "{}")}}},
      {"mistral content then call",
       Format::kMistral,
       R"(Let me look that up.[TOOL_CALLS][{"name": "f", "arguments": {"q": "ü"}}])",
       {"Let me look that up.", {Call("f", R"({"q":"ü"})")}}},
      {"mistral v11",
       Format::kMistral,
       R"([TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{})",
       {"", {Call("get_weather", R"({"city":"Paris"})"), Call("get_time", "{}")}}},
      {"mistral v11 call id",
       Format::kMistral,
       R"([TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{"city": "Paris"})",
       {"", {Call("get_weather", R"({"city":"Paris"})")}}},
      {"mistral malformed", Format::kMistral,
       R"([TOOL_CALLS][{"name": "f", "arguments": {"a": 1}])",
       Text(R"([TOOL_CALLS][{"name": "f", "arguments": {"a": 1}])")},
      {"mistral element without name", Format::kMistral,
       R"([TOOL_CALLS][{"name": "f"}, {"arguments": {}}])",
       Text(R"([TOOL_CALLS][{"name": "f"}, {"arguments": {}}])")},
      {"mistral no call", Format::kMistral, "Use [TOOLS] or [TOOL_CALL] here.",
       Text("Use [TOOLS] or [TOOL_CALL] here.")},

      // Functionary v3.1.
      {"functionary single",
       Format::kFunctionary,
       R"(<function=get_weather>{"city": "Paris"}</function>)",
       {"", {Call("get_weather", R"({"city":"Paris"})")}}},
      {"functionary parallel",
       Format::kFunctionary,
       R"(<function=a>{"x": 1}</function><function=b>{"text": "</function> <function=c>"}</function>)",
       {"", {Call("a", R"({"x":1})"), Call("b", R"({"text":"</function> <function=c>"})")}}},
      {"functionary content then call",
       Format::kFunctionary,
       "I will check.\n<function=get_weather>{\"city\": \"Paris\"}</function>",
       {"I will check.\n", {Call("get_weather", R"({"city":"Paris"})")}}},
      {"functionary python",
       Format::kFunctionary,
       "<|python_tag|>import math\nprint(\"<function=x>\", math.pi)",
       {"", {Call("python", R"js({"code":"import math\nprint(\"<function=x>\", math.pi)"})js")}}},
      {"functionary unterminated", Format::kFunctionary,
       R"(<function=get_weather>{"city": "Paris"})",
       Text(R"(<function=get_weather>{"city": "Paris"})")},
      {"functionary empty name", Format::kFunctionary, "<function=>{}</function>",
       Text("<function=>{}</function>")},
      {"functionary no call", Format::kFunctionary, "a <func b <|python c",
       Text("a <func b <|python c")},

      // Command R+.
      {"command r single",
       Format::kCommandR,
       "Action: ```json\n[\n    {\n        \"tool_name\": \"internet_search\",\n        "
       "\"parameters\": {\n            \"query\": \"weather Paris\"\n        }\n    }\n]\n```",
       {"", {Call("internet_search", R"({"query":"weather Paris"})")}}},
      {"command r plan then parallel",
       Format::kCommandR,
       "Plan: First I will search, then look up the time.\nAction: ```json\n[{\"tool_name\": "
       "\"internet_search\", \"parameters\": {\"query\": \"Paris\"}}, {\"tool_name\": "
       "\"get_time\", \"parameters\": {}}]\n```\n",
       {"Plan: First I will search, then look up the time.\n",
        {Call("internet_search", R"({"query":"Paris"})"), Call("get_time", "{}")}}},
      {"command r directly answer", Format::kCommandR,
       "Action: ```json\n[{\"tool_name\": \"directly_answer\", \"parameters\": {}}]\n```",
       Text("Action: ```json\n[{\"tool_name\": \"directly_answer\", \"parameters\": {}}]\n```")},
      {"command r directly answer mixed",
       Format::kCommandR,
       "Action: ```json\n[{\"tool_name\": \"directly-answer\", \"parameters\": {}}, "
       "{\"tool_name\": \"calc\", \"parameters\": {\"e\": \"1+1\"}}]\n```",
       {"", {Call("calc", R"({"e":"1+1"})")}}},
      {"command r unfenced",
       Format::kCommandR,
       R"(Action: [{"tool_name": "calc", "parameters": {"e": "```"}}])",
       {"", {Call("calc", R"({"e":"```"})")}}},
      {"command r prose", Format::kCommandR,
       "Action: none needed. Action:", Text("Action: none needed. Action:")},
      {"command r unclosed fence", Format::kCommandR,
       "Action: ```json\n[{\"tool_name\": \"calc\", \"parameters\": {}}]\n",
       Text("Action: ```json\n[{\"tool_name\": \"calc\", \"parameters\": {}}]\n")},

      // DeepSeek-R1 distills.
      {"deepseek single",
       Format::kDeepSeekR1,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
       "{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       {"", {Call("get_weather", R"({"city":"Paris"})")}}},
      {"deepseek think then parallel",
       Format::kDeepSeekR1,
       "<think>\nI need the weather and the time.\n</think>\n\n<｜tool▁calls▁begin｜>"
       "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"東京\"}\n"
       "```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n"
       "{\"s\": \"<｜tool▁call▁end｜>\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       {"<think>\nI need the weather and the time.\n</think>\n\n",
        {Call("get_weather", R"({"city":"東京"})"),
         Call("get_time", R"({"s":"<｜tool▁call▁end｜>"})")}}},
      {"deepseek block never closed",
       Format::kDeepSeekR1,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n```"
       "<｜tool▁call▁end｜>",
       {"", {Call("f", "{}")}}},
      {"deepseek bad json", Format::kDeepSeekR1,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": }\n```"
       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       Text("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": "
            "}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>")},
      {"deepseek unterminated", Format::kDeepSeekR1,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n",
       Text("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n")},

      // Firefunction v2.
      {"firefunction single",
       Format::kFirefunction,
       R"( functools[{"name": "get_weather", "arguments": {"city": "Paris"}}])",
       {"", {Call("get_weather", R"({"city":"Paris"})")}}},
      {"firefunction parallel with content",
       Format::kFirefunction,
       R"(Checking both. functools[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"s": "functools["}}])",
       {"Checking both. ", {Call("a", "{}"), Call("b", R"({"s":"functools["})")}}},
      {"firefunction python code", Format::kFirefunction,
       "import functools\nfunctools.reduce(f, xs)",
       Text("import functools\nfunctools.reduce(f, xs)")},
  };
  return *cases;
}

TEST(ToolCallParserTest, RecordedOutputsWhole) {
  for (const Case& c : Cases()) {
    auto parser = ToolCallParser::Create(c.format);
    EXPECT_EQ(parser->Parse(c.text), c.expected) << c.label;
  }
}

TEST(ToolCallParserTest, RecordedOutputsStreamedAtEverySplit) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.label);
    ExpectStreamingAgrees(c.format, c.text, c.expected);
  }
}

TEST(ToolCallParserTest, CallDeltasComeNameFirstThenArgumentFragments) {
  auto parser = ToolCallParser::Create(Format::kHermes);
  StreamDelta d = parser->Feed(
      "Hi<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"San Francisco\", "
      "\"unit\": \"celsius\"}}</tool_call>");
  EXPECT_EQ(d.content, "Hi");
  ASSERT_GE(d.calls.size(), 3u);
  EXPECT_EQ(d.calls[0], (ToolCallDelta{0, "get_weather", ""}));
  std::string arguments;
  for (size_t i = 1; i < d.calls.size(); ++i) {
    EXPECT_EQ(d.calls[i].index, 0);
    EXPECT_TRUE(d.calls[i].name.empty());
    EXPECT_LE(d.calls[i].arguments.size(), ToolCallParser::kArgumentChunkBytes);
    arguments += d.calls[i].arguments;
  }
  EXPECT_EQ(arguments, R"({"city":"San Francisco","unit":"celsius"})");
  EXPECT_TRUE(parser->Finish().empty());
}

TEST(ToolCallParserTest, ContentIsReleasedAtOnceAndMarkerPrefixesHeld) {
  auto parser = ToolCallParser::Create(Format::kHermes);
  EXPECT_EQ(parser->Feed("Hello <").content, "Hello ");
  EXPECT_EQ(parser->Feed("b>").content, "<b>");
  EXPECT_EQ(parser->Feed("x <tool_c").content, "x ");
  StreamDelta d = parser->Feed("all>{\"name\": \"f\"}");
  EXPECT_TRUE(d.empty()) << "a call is held until it is complete";
  d = parser->Feed("</tool_call>");
  ASSERT_EQ(d.calls.size(), 2u);  // the name, then "{}"
  EXPECT_EQ(d.calls[0].name, "f");
}

TEST(ToolCallParserTest, ParseIgnoresStreamingState) {
  auto parser = ToolCallParser::Create(Format::kHermes);
  parser->Feed("<tool_call>{\"na");
  EXPECT_EQ(parser->Parse("plain"), Text("plain"));
  StreamDelta d = parser->Feed("me\": \"f\"}</tool_call>");
  ASSERT_FALSE(d.calls.empty());
  EXPECT_EQ(d.calls[0].name, "f");
}

TEST(ToolCallParserTest, SplitUtf8IsNotReleasedHalfWay) {
  auto parser = ToolCallParser::Create(Format::kHermes);
  std::string text = "é東🙂";
  std::string seen;
  for (char c : text) {
    StreamDelta d = parser->Feed(std::string(1, c));
    EXPECT_TRUE(IsValidUtf8(d.content));
    seen += d.content;
  }
  seen += parser->Finish().content;
  EXPECT_EQ(seen, text);
}

TEST(ToolCallParserTest, LlamaHoldsOnlyWhatCanStillBeACall) {
  auto parser = ToolCallParser::Create(Format::kLlama3Json);
  EXPECT_TRUE(parser->Feed(" {\"name\": ").empty());
  EXPECT_EQ(parser->Feed("1} then").content, " {\"name\": 1} then");
  EXPECT_EQ(parser->Feed(" {more}").content, " {more}");
  auto plain = ToolCallParser::Create(Format::kLlama3Json);
  EXPECT_EQ(plain->Feed("Hello").content, "Hello");
}

TEST(ToolCallParserTest, HeldBytesAreBounded) {
  constexpr size_t kBound = 64;
  std::string big_arg(100, 'x');
  std::string text = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"" + big_arg +
                     "\"}}</tool_call><tool_call>{\"name\": \"g\"}</tool_call>";
  auto parser = ToolCallParser::Create(Format::kHermes, kBound);
  ParsedOutput whole = parser->Parse(text);
  ASSERT_EQ(whole.calls.size(), 1u);
  EXPECT_EQ(whole.calls[0].name, "g");
  EXPECT_EQ(whole.content, text.substr(0, text.find("<tool_call>{\"name\": \"g\"")));
  ExpectStreamingAgrees(Format::kHermes, text, whole, kBound);
  // Nothing beyond the bound is held: a long unfinished call comes out as content.
  auto streaming = ToolCallParser::Create(Format::kHermes, kBound);
  std::string open = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"" + big_arg;
  EXPECT_EQ(streaming->Feed(open).content, open);
  // Whitespace next to calls is dropped only while it is within the bound.
  std::string spaces(kBound, ' ');
  std::string spaced = "<tool_call>{\"name\": \"g\"}</tool_call>" + spaces;
  EXPECT_EQ(parser->Parse(spaced).content, spaces);
  ExpectStreamingAgrees(Format::kHermes, spaced, parser->Parse(spaced), kBound);
}

TEST(ToolCallParserTest, TooDeepArgumentsAreContent) {
  std::string deep =
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": " + std::string(300, '[') +
      std::string(300, ']') + "}}</tool_call>";
  auto parser = ToolCallParser::Create(Format::kHermes);
  EXPECT_EQ(parser->Parse(deep), Text(deep));
}

// A quadratic parser would take minutes on these; each finishes in well under a second.
TEST(ToolCallParserTest, LargeInputsStayLinear) {
  std::string value(900 * 1024, 'v');
  std::string text =
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"" + value + "\"}}</tool_call>";
  auto parser = ToolCallParser::Create(Format::kHermes);
  Assembler assembler(/*check_utf8=*/false);
  auto start = std::chrono::steady_clock::now();
  for (char c : text) assembler.Add(parser->Feed(std::string_view(&c, 1)));
  assembler.Add(parser->Finish());
  ASSERT_EQ(assembler.out().calls.size(), 1u);
  EXPECT_EQ(assembler.out().calls[0].arguments.size(), value.size() + 8);

  std::string nested;
  while (nested.size() < 1000 * 1024) nested += "<tool_call>{\"a\": \"";
  for (Format f : {Format::kHermes, Format::kMistral, Format::kDeepSeekR1, Format::kLlama3Json,
                   Format::kFunctionary, Format::kCommandR, Format::kFirefunction}) {
    EXPECT_EQ(ToolCallParser::Create(f)->Parse(nested).content, nested);
  }
  std::string markers;
  while (markers.size() < 1000 * 1024) markers += "[TOOL_CALLS]<tool_call>functools Action: ";
  EXPECT_EQ(ToolCallParser::Create(Format::kMistral)->Parse(markers).content, markers);
  EXPECT_EQ(ToolCallParser::Create(Format::kHermes)->Parse(markers).content, markers);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

}  // namespace
}  // namespace baton::toolcall
