// response_format, tool_choice and the tool-call output of the OpenAI front door
// (frontdoor/openai/structured_request.h, tool_call_output.h): what the parsers make of
// the request, the schemas forced calls are constrained to, and how the generated text
// becomes content and tool calls, whole and streamed.
#include <string>
#include <vector>

#include "frontdoor/openai/openai_request.h"
#include "frontdoor/openai/openai_response.h"
#include "frontdoor/openai/structured_request.h"
#include "frontdoor/openai/tool_call_output.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace baton {
namespace {

using frontdoor::ChoiceOut;
using frontdoor::OpenAiRequest;
using frontdoor::ToolCallOut;
using frontdoor::ToolCallOutput;
using Json = nlohmann::json;

const frontdoor::ProtocolLimits kLimits;

constexpr char kWeather[] = R"({"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
    "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city", "unit"],
    "additionalProperties": false}}})";
constexpr char kTime[] = R"({"type": "function", "function": {"name": "get_time"}})";

OpenAiRequest Chat(const std::string& extra) {
  absl::StatusOr<OpenAiRequest> r = frontdoor::ParseChatRequest(
      R"({"messages": [{"role": "user", "content": "hi"}], )" + extra + "}", kLimits);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : OpenAiRequest{};
}

std::string StrCatTools() { return std::string(R"("tools": [)") + kWeather + "," + kTime + "]"; }

TEST(ToolChoiceTest, DefaultsFollowOpenAi) {
  EXPECT_EQ(Chat(R"("n": 1)").tool_choice, OpenAiRequest::ToolChoice::kNone);
  const OpenAiRequest r = Chat(StrCatTools());
  EXPECT_EQ(r.tool_choice, OpenAiRequest::ToolChoice::kAuto);
  EXPECT_EQ(r.constraint, OpenAiRequest::Constraint::kNone);
  EXPECT_TRUE(r.parallel_tool_calls);
  EXPECT_EQ(Chat(StrCatTools() + R"(, "tool_choice": "none")").tool_choice,
            OpenAiRequest::ToolChoice::kNone);
}

TEST(ToolChoiceTest, NamedFunctionIsConstrainedToItsParameters) {
  const OpenAiRequest r =
      Chat(StrCatTools() +
           R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})");
  EXPECT_EQ(r.tool_choice, OpenAiRequest::ToolChoice::kNamed);
  EXPECT_EQ(r.tool_choice_name, "get_weather");
  ASSERT_EQ(r.constraint, OpenAiRequest::Constraint::kJsonSchema);
  EXPECT_EQ(Json::parse(r.constraint_schema), Json::parse(kWeather)["function"]["parameters"]);
}

TEST(ToolChoiceTest, NamedFunctionWithoutParametersTakesAnEmptyObject) {
  const OpenAiRequest r = Chat(
      StrCatTools() + R"(, "tool_choice": {"type": "function", "function": {"name": "get_time"}})");
  EXPECT_EQ(Json::parse(r.constraint_schema),
            Json::parse(R"({"type": "object", "properties": {}})"));
}

TEST(ToolChoiceTest, RequiredIsAnArrayOfCallsOneBranchPerTool) {
  const OpenAiRequest r = Chat(StrCatTools() + R"(, "tool_choice": "required")");
  EXPECT_EQ(r.tool_choice, OpenAiRequest::ToolChoice::kRequired);
  ASSERT_EQ(r.constraint, OpenAiRequest::Constraint::kJsonSchema);
  const Json schema = Json::parse(r.constraint_schema);
  EXPECT_EQ(schema["type"], "array");
  EXPECT_EQ(schema["minItems"], 1);
  EXPECT_FALSE(schema.contains("maxItems"));
  const Json& branches = schema["items"]["anyOf"];
  ASSERT_EQ(branches.size(), 2u);
  EXPECT_EQ(branches[0]["properties"]["name"]["enum"], Json::array({"get_weather"}));
  EXPECT_EQ(branches[0]["properties"]["parameters"],
            Json::parse(kWeather)["function"]["parameters"]);
  EXPECT_EQ(branches[1]["properties"]["name"]["enum"], Json::array({"get_time"}));
  EXPECT_EQ(branches[1]["required"], Json::array({"name", "parameters"}));

  const OpenAiRequest one =
      Chat(StrCatTools() + R"(, "tool_choice": "required", "parallel_tool_calls": false)");
  EXPECT_FALSE(one.parallel_tool_calls);
  EXPECT_EQ(Json::parse(one.constraint_schema)["maxItems"], 1);
}

TEST(ToolChoiceTest, EachToolsDefinitionsMoveToTheRootUnderItsOwnName) {
  const OpenAiRequest r = Chat(R"("tools": [
      {"type": "function", "function": {"name": "a", "parameters": {"type": "object",
       "properties": {"p": {"$ref": "#/$defs/Point"}}, "required": ["p"],
       "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "integer"}},
                           "required": ["x"]}}}}},
      {"type": "function", "function": {"name": "b", "parameters": {"type": "object",
       "properties": {"q": {"$ref": "#/definitions/Point"}}, "required": ["q"],
       "definitions": {"Point": {"type": "string"}}}}}],
      "tool_choice": "required")");
  const Json schema = Json::parse(r.constraint_schema);
  EXPECT_EQ(schema["$defs"]["tool0_Point"]["type"], "object");
  EXPECT_EQ(schema["$defs"]["tool1_Point"]["type"], "string");
  const Json& branches = schema["items"]["anyOf"];
  EXPECT_EQ(branches[0]["properties"]["parameters"]["properties"]["p"]["$ref"],
            "#/$defs/tool0_Point");
  EXPECT_EQ(branches[1]["properties"]["parameters"]["properties"]["q"]["$ref"],
            "#/$defs/tool1_Point");
  EXPECT_FALSE(branches[0]["properties"]["parameters"].contains("$defs"));
}

TEST(ResponseFormatTest, JsonModes) {
  EXPECT_EQ(Chat(R"("response_format": {"type": "text"})").constraint,
            OpenAiRequest::Constraint::kNone);
  EXPECT_EQ(Chat(R"("response_format": {"type": "json_object"})").constraint,
            OpenAiRequest::Constraint::kJsonObject);
  const OpenAiRequest r = Chat(R"("response_format": {"type": "json_schema", "json_schema":
      {"name": "n", "strict": true, "schema": {"type": "object", "properties":
      {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": false}}})");
  ASSERT_EQ(r.constraint, OpenAiRequest::Constraint::kJsonSchema);
  EXPECT_EQ(r.constraint_schema,
            R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],)"
            R"("additionalProperties":false})");
  // Completions take it too.
  absl::StatusOr<OpenAiRequest> completion = frontdoor::ParseCompletionRequest(
      R"({"prompt": "x", "response_format": {"type": "json_object"}})", kLimits);
  ASSERT_TRUE(completion.ok()) << completion.status();
  EXPECT_EQ(completion->constraint, OpenAiRequest::Constraint::kJsonObject);
}

// Feeds `pieces` as a stream would, then finishes with `finish`; returns every chunk's
// output merged (content concatenated, calls folded) plus the deltas as sent.
struct Streamed {
  std::string content;
  std::vector<ToolCallOut> calls;
  std::vector<ToolCallOut> deltas;
  std::string finish_reason;
};
Streamed Stream(ToolCallOutput& out, const std::vector<std::string>& pieces,
                const std::string& finish = "stop") {
  Streamed s;
  for (size_t i = 0; i < pieces.size(); ++i) {
    ChoiceOut c;
    const bool last = i + 1 == pieces.size();
    if (last) c.finish_reason = finish;
    out.Feed(pieces[i], &c);
    if (last) out.Finish(&c);
    s.content += c.text;
    s.deltas.insert(s.deltas.end(), c.tool_calls.begin(), c.tool_calls.end());
    if (last) s.finish_reason = c.finish_reason.value_or("");
  }
  ToolCallOutput::MergeInto(s.deltas, &s.calls);
  return s;
}

TEST(ToolCallOutputTest, PlainContentWithoutToolsOrWithToolChoiceNone) {
  EXPECT_EQ(ToolCallOutput::ForRequest(Chat(R"("n": 1)"), toolcall::Format::kHermes), nullptr);
  EXPECT_EQ(ToolCallOutput::ForRequest(Chat(StrCatTools() + R"(, "tool_choice": "none")"),
                                       toolcall::Format::kHermes),
            nullptr);
  // Auto, but no parser for the model: the markup stays content.
  EXPECT_EQ(ToolCallOutput::ForRequest(Chat(StrCatTools()), std::nullopt), nullptr);
}

TEST(ToolCallOutputTest, NamedStreamsArgumentsBehindOneCall) {
  auto out = ToolCallOutput::ForRequest(
      Chat(StrCatTools() +
           R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})"),
      std::nullopt);
  ASSERT_NE(out, nullptr);
  const Streamed s = Stream(*out, {R"({"city":)", R"( "Oslo", "unit")", R"(: "c"})"});
  EXPECT_EQ(s.content, "");
  ASSERT_EQ(s.deltas.size(), 3u);
  EXPECT_EQ(s.deltas[0].name, "get_weather");
  EXPECT_FALSE(s.deltas[0].id.empty());
  EXPECT_TRUE(s.deltas[1].name.empty());
  EXPECT_TRUE(s.deltas[1].id.empty());
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(Json::parse(s.calls[0].arguments), Json::parse(R"({"city": "Oslo", "unit": "c"})"));
  EXPECT_EQ(s.finish_reason, "tool_calls");
}

TEST(ToolCallOutputTest, RequiredTurnsTheArrayIntoCallsWithUniqueIds) {
  auto out = ToolCallOutput::ForRequest(Chat(StrCatTools() + R"(, "tool_choice": "required")"), {});
  ASSERT_NE(out, nullptr);
  const Streamed s = Stream(
      *out, {R"([{"name": "get_time", "parameters": {}}, )",
             R"({"name": "get_weather", "parameters": {"city": "Rome",)", R"( "unit": "f"}}])"});
  EXPECT_EQ(s.content, "");
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0].name, "get_time");
  EXPECT_EQ(s.calls[0].arguments, "{}");
  EXPECT_EQ(s.calls[1].name, "get_weather");
  EXPECT_EQ(Json::parse(s.calls[1].arguments), Json::parse(R"({"city":"Rome","unit":"f"})"));
  EXPECT_NE(s.calls[0].id, s.calls[1].id);
  EXPECT_EQ(s.finish_reason, "tool_calls");
}

TEST(ToolCallOutputTest, RequiredCutShortIsContentNotBrokenCalls) {
  auto out = ToolCallOutput::ForRequest(Chat(StrCatTools() + R"(, "tool_choice": "required")"), {});
  const Streamed s = Stream(*out, {R"([{"name": "get_time", "param)"}, "length");
  EXPECT_TRUE(s.calls.empty());
  EXPECT_EQ(s.content, R"([{"name": "get_time", "param)");
  EXPECT_EQ(s.finish_reason, "length");
}

TEST(ToolCallOutputTest, AutoParsesTheTemplateFamilysMarkup) {
  const std::string text =
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"unit\": \"c\"}}\n</tool_call>";
  auto whole = ToolCallOutput::ForRequest(Chat(StrCatTools()), toolcall::Format::kHermes);
  ASSERT_NE(whole, nullptr);
  const Streamed a = Stream(*whole, {text});
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(Json::parse(a.calls[0].arguments), Json::parse(R"({"city":"Paris","unit":"c"})"));
  EXPECT_THAT(a.content, ::testing::StartsWith("Let me look."));
  EXPECT_EQ(a.content.find("<tool_call>"), std::string::npos);
  EXPECT_EQ(a.finish_reason, "tool_calls");
  // Byte by byte: the same calls and content.
  auto streamed = ToolCallOutput::ForRequest(Chat(StrCatTools()), toolcall::Format::kHermes);
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  const Streamed b = Stream(*streamed, bytes);
  EXPECT_EQ(b.content, a.content);
  ASSERT_EQ(b.calls.size(), 1u);
  EXPECT_EQ(b.calls[0].name, a.calls[0].name);
  EXPECT_EQ(b.calls[0].arguments, a.calls[0].arguments);
}

TEST(ToolCallOutputTest, WithoutParallelCallsOnlyTheFirstIsKept) {
  const std::string call =
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n";
  auto out = ToolCallOutput::ForRequest(Chat(StrCatTools() + R"(, "parallel_tool_calls": false)"),
                                        toolcall::Format::kHermes);
  const Streamed s = Stream(*out, {call + call});
  EXPECT_EQ(s.calls.size(), 1u);
}

TEST(ToolCallResponseTest, MessageAndChunkShapes) {
  ChoiceOut c;
  c.finish_reason = "tool_calls";
  c.tool_calls.push_back(ToolCallOut{0, "call-1", "f", R"({"a":1})"});
  const Json whole = Json::parse(frontdoor::ChatResponseJson("id", 1, "m", {c}, {}));
  const Json& message = whole["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null());
  EXPECT_EQ(message["tool_calls"][0]["id"], "call-1");
  EXPECT_EQ(message["tool_calls"][0]["type"], "function");
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], R"({"a":1})");
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "tool_calls");

  ChoiceOut first;
  first.tool_calls.push_back(ToolCallOut{0, "call-1", "f", ""});
  const Json chunk = Json::parse(frontdoor::ChatChunkJson("id", 1, "m", first, false));
  const Json& d = chunk["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(d["index"], 0);
  EXPECT_EQ(d["id"], "call-1");
  EXPECT_EQ(d["function"]["name"], "f");
  ChoiceOut later;
  later.tool_calls.push_back(ToolCallOut{0, "", "", R"({"a")"});
  const Json next = Json::parse(frontdoor::ChatChunkJson("id", 1, "m", later, false));
  const Json& n = next["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_FALSE(n.contains("id"));
  EXPECT_FALSE(n["function"].contains("name"));
  EXPECT_EQ(n["function"]["arguments"], R"({"a")");
}

}  // namespace
}  // namespace baton
