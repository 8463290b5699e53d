#include "frontdoor/openai/openai_protocol.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/strings.h"
#include "frontdoor/openai/request_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::router {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using Json = nlohmann::json;

const frontdoor::ProtocolLimits kLimits;
constexpr char kChatBase[] = R"("messages": [{"role": "user", "content": "hi"}])";
constexpr char kPromptBase[] = R"("prompt": "hi")";

std::string Chat(const std::string& extra) {
  return "{" + std::string(kChatBase) + (extra.empty() ? "" : ", " + extra) + "}";
}
std::string Completion(const std::string& extra) {
  return "{" + std::string(kPromptBase) + (extra.empty() ? "" : ", " + extra) + "}";
}

// ---- rejected requests: the message names the parameter and the bound or type ----

struct BadCase {
  const char* name;
  bool chat;
  std::string body;
  std::string message;  // a substring of the status message
  std::string param;    // the "baton.param" payload ("" = none)
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class BadRequestTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadRequestTest, IsInvalidArgumentNamingTheParameter) {
  const BadCase& c = GetParam();
  absl::StatusOr<frontdoor::OpenAiRequest> r =
      c.chat ? frontdoor::ParseChatRequest(c.body, kLimits)
             : frontdoor::ParseCompletionRequest(c.body, kLimits);
  ASSERT_FALSE(r.ok()) << c.body;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message));
  EXPECT_EQ(frontdoor::ParamOf(r.status()), c.param);
  EXPECT_EQ(frontdoor::ToApiError(r.status()).http_status, 400);
}

const std::string kLongStop(1025, 'x');
const std::string kStop17 = [] {
  std::string s = "[";
  for (int i = 0; i < 17; ++i) s += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
  return s + "]";
}();

INSTANTIATE_TEST_SUITE_P(
    Body, BadRequestTest,
    ::testing::Values(
        BadCase{"Malformed", true, R"({"messages": [)", "request body is not valid JSON: ", ""},
        BadCase{"MalformedPosition", false, R"({"prompt": tru})", "(byte 14)", ""},
        BadCase{"TrailingGarbage", false, R"({"prompt": "a"} x)", "not valid JSON", ""},
        BadCase{"Empty", false, "  ", "request body is empty", ""},
        BadCase{"NotObject", true, "[1]", "request body must be a JSON object, got array", ""},
        BadCase{"InvalidUtf8", true, "{\"messages\": \"\xC3\x28\"}",
                "request body is not valid UTF-8 at byte 14", ""},
        BadCase{"LoneSurrogateEscape", false, R"({"prompt": "\ud800"})", "not valid JSON", ""},
        BadCase{"NaNLiteral", false, Completion(R"("temperature": NaN)"), "not valid JSON", ""},
        BadCase{"TooDeep", false,
                Completion("\"x\": " + std::string(100, '[') + std::string(100, ']')),
                "deeper than 64 levels", ""}),
    [](const auto& info) { return std::string(info.param.name); });

INSTANTIATE_TEST_SUITE_P(
    Common, BadRequestTest,
    ::testing::Values(
        BadCase{"TemperatureString", true, Chat(R"("temperature": "0.5")"),
                "'temperature' must be a number, got string", "temperature"},
        BadCase{"TemperatureBool", false, Completion(R"("temperature": true)"),
                "'temperature' must be a number, got boolean", "temperature"},
        // nlohmann rejects a number that overflows a double, so no infinity gets through.
        BadCase{"NumberOverflow", false, Completion(R"("top_p": 1e999)"),
                "not valid JSON: number overflow parsing '1e999'", ""},
        BadCase{"ModelNumber", true, Chat(R"("model": 7)"), "'model' must be a string, got number",
                "model"},
        BadCase{"StreamString", true, Chat(R"("stream": "true")"),
                "'stream' must be a boolean, got string", "stream"},
        BadCase{"NTooLarge", true, Chat(R"("n": 40)"), "'n' is 40; the maximum is 16", "n"},
        BadCase{"NZero", false, Completion(R"("n": 0)"), "'n' must be at least 1, got 0", "n"},
        BadCase{"NFraction", false, Completion(R"("n": 1.5)"), "'n' must be an integer, got 1.5",
                "n"},
        BadCase{"NHuge", false, Completion(R"("n": 1e30)"), "the maximum is 16", "n"},
        BadCase{"NBool", false, Completion(R"("n": true)"), "'n' must be an integer, got boolean",
                "n"},
        BadCase{"StopNumber", true, Chat(R"("stop": 5)"),
                "'stop' must be a string or an array of strings, got number", "stop"},
        BadCase{"StopTooMany", true, Chat("\"stop\": " + kStop17),
                "'stop' has 17 entries; the maximum is 16", "stop"},
        BadCase{"StopTooLong", false, Completion("\"stop\": [\"" + kLongStop + "\"]"),
                "'stop[0]' is 1025 bytes; the maximum is 1024", "stop[0]"},
        BadCase{"StopEmpty", false, Completion(R"("stop": "")"), "'stop' must not be empty",
                "stop"},
        BadCase{"StopEntryType", false, Completion(R"("stop": ["a", null])"),
                "'stop[1]' must be a string, got null", "stop[1]"},
        BadCase{"StopTokenIdNegative", false, Completion(R"("stop_token_ids": [2, -1])"),
                "'stop_token_ids[1]' must be at least 0, got -1", "stop_token_ids[1]"},
        BadCase{"LogitBiasKey", true, Chat(R"("logit_bias": {"abc": 1})"),
                "'logit_bias' key 'abc' is not a token id", "logit_bias"},
        BadCase{"LogitBiasNegativeKey", true, Chat(R"("logit_bias": {"-5": 1})"),
                "'logit_bias' key '-5' is not a token id", "logit_bias"},
        BadCase{"LogitBiasValue", true, Chat(R"("logit_bias": {"5": "x"})"),
                "'logit_bias.5' must be a number, got string", "logit_bias.5"},
        BadCase{"LogitBiasRange", true, Chat(R"("logit_bias": {"5": 101})"),
                "'logit_bias.5' is 101; biases must be between -100 and 100", "logit_bias.5"},
        BadCase{"LogitBiasArray", true, Chat(R"("logit_bias": [1])"),
                "'logit_bias' must be an object", "logit_bias"},
        BadCase{"StreamOptionsWithoutStream", true, Chat(R"("stream_options": {})"),
                "'stream_options' is only allowed when 'stream' is true", "stream_options"},
        BadCase{"IncludeUsageType", true,
                Chat(R"("stream": true, "stream_options": {"include_usage": 1})"),
                "'stream_options.include_usage' must be a boolean, got number",
                "stream_options.include_usage"},
        BadCase{"SeedTooLarge", false, Completion(R"("seed": 18446744073709551615)"),
                "'seed' is 18446744073709551615; the maximum is 9223372036854775807", "seed"},
        BadCase{"Echo", false, Completion(R"("echo": true)"),
                "'echo' is not supported by this server", "echo"},
        BadCase{"BestOf", false, Completion(R"("best_of": 3)"), "'best_of' is not supported",
                "best_of"},
        BadCase{"ResponseFormatSchemaMissing", true,
                Chat(R"("response_format": {"type": "json_schema"})"),
                "'response_format.json_schema' is required when the type is 'json_schema'",
                "response_format.json_schema"},
        BadCase{"ResponseFormatType", false, Completion(R"("response_format": {"type": "xml"})"),
                "'response_format.type' is 'xml'; expected 'text', 'json_object' or 'json_schema'",
                "response_format.type"},
        BadCase{"ResponseFormatUnsupportedKeyword", true,
                Chat(R"("response_format": {"type": "json_schema", "json_schema": {"name": "x",
                     "schema": {"type": "string", "pattern": "^a+$"}}})"),
                "'response_format.json_schema.schema' cannot be served",
                "response_format.json_schema.schema"},
        BadCase{"GuidedJson", true, Chat(R"("guided_json": {"type": "object"})"),
                "'guided_json' is not supported", "guided_json"},
        BadCase{"RequestIdControl", true, Chat(R"("request_id": "a\r\nb")"),
                "'request_id' must not contain control characters", "request_id"},
        BadCase{"RequestIdTooLong", true, Chat("\"request_id\": \"" + std::string(300, 'a') + "\""),
                "'request_id' is 300 bytes; the maximum is 256", "request_id"},
        BadCase{"PromptCacheKeyTooLong", true,
                Chat("\"prompt_cache_key\": \"" + std::string(257, 'k') + "\""),
                "'prompt_cache_key' is 257 bytes; the maximum is 256", "prompt_cache_key"},
        BadCase{"PromptCacheKeyNumber", false, Completion(R"("prompt_cache_key": 7)"),
                "prompt_cache_key", "prompt_cache_key"},
        BadCase{"CacheSaltEmpty", true, Chat(R"("cache_salt": "")"),
                "'cache_salt' must be a non-empty string", "cache_salt"},
        BadCase{"PriorityRange", true, Chat(R"("priority": 3000000000)"),
                "the maximum is 2147483647", "priority"}),
    [](const auto& info) { return std::string(info.param.name); });

INSTANTIATE_TEST_SUITE_P(
    Completions, BadRequestTest,
    ::testing::Values(
        BadCase{"PromptMissing", false, R"({"model": "m"})", "'prompt' is required", "prompt"},
        BadCase{"PromptNull", false, R"({"prompt": null})", "'prompt' is required", "prompt"},
        BadCase{"PromptNumber", false, R"({"prompt": 5})", "'prompt' must be a string", "prompt"},
        BadCase{"PromptEmptyArray", false, R"({"prompt": []})", "'prompt' must not be empty",
                "prompt"},
        BadCase{"MultiplePrompts", false, R"({"prompt": ["a", "b"]})",
                "'prompt' has 2 prompts; send one request per prompt", "prompt"},
        BadCase{"MultipleTokenPrompts", false, R"({"prompt": [[1], [2]]})",
                "'prompt' has 2 prompts", "prompt"},
        BadCase{"MixedTokenIds", false, R"({"prompt": [1, "a"]})",
                "'prompt[1]' must be an integer, got string", "prompt[1]"},
        BadCase{"NegativeTokenId", false, R"({"prompt": [[1, -2]]})",
                "'prompt[0][1]' must be at least 0, got -2", "prompt[0][1]"},
        BadCase{"EmptyTokenIds", false, R"({"prompt": [[]]})", "'prompt[0]' must not be empty",
                "prompt[0]"},
        BadCase{"PromptObject", false, R"({"prompt": [{}]})", "'prompt[0]' must be a string",
                "prompt[0]"},
        // -1 and 0 mean off; anything lower was once passed on as "off".
        BadCase{"TopKBelowMinusOne", false, Completion(R"("top_k": -5)"),
                "'top_k' must be at least -1, got -5", "top_k"},
        BadCase{"MaxTokensNegative", false, Completion(R"("max_tokens": -5)"),
                "'max_tokens' must be at least 1, got -5", "max_tokens"},
        BadCase{"MaxTokensZero", false, Completion(R"("max_tokens": 0)"),
                "'max_tokens' must be at least 1, got 0", "max_tokens"},
        BadCase{"MaxTokensString", false, Completion(R"("max_tokens": "16")"),
                "'max_tokens' must be an integer, got string", "max_tokens"},
        BadCase{"LogprobsTooMany", false, Completion(R"("logprobs": 25)"),
                "'logprobs' is 25; the maximum is 20", "logprobs"},
        BadCase{"LogprobsNegative", false, Completion(R"("logprobs": -1)"),
                "'logprobs' must be at least 0", "logprobs"},
        BadCase{"LogprobsBool", false, Completion(R"("logprobs": true)"),
                "'logprobs' must be an integer, got boolean", "logprobs"}),
    [](const auto& info) { return std::string(info.param.name); });

INSTANTIATE_TEST_SUITE_P(
    ChatCompletions, BadRequestTest,
    ::testing::Values(
        BadCase{"MessagesMissing", true, R"({"model": "m"})", "'messages' is required", "messages"},
        BadCase{"MessagesEmpty", true, R"({"messages": []})", "'messages' must not be empty",
                "messages"},
        BadCase{"MessagesString", true, R"({"messages": "hi"})",
                "'messages' must be an array, got string", "messages"},
        BadCase{"MessageNotObject", true, R"({"messages": [1]})",
                "'messages[0]' must be an object, got number", "messages[0]"},
        BadCase{"RoleMissing", true, R"({"messages": [{"content": "x"}]})",
                "'messages[0].role' is required", "messages[0].role"},
        BadCase{"RoleNumber", true, R"({"messages": [{"role": 1, "content": "x"}]})",
                "'messages[0].role' must be a string, got number", "messages[0].role"},
        // OpenAI's roles only; a made-up one was once passed to the template.
        BadCase{"RoleUnknown", true,
                R"({"messages": [{"role": "user", "content": "a"}, {"role": "narrator",
                   "content": "b"}]})",
                "Invalid value for 'messages[1].role': 'narrator'. Supported values are: "
                "'system', 'developer', 'user', 'assistant', 'tool', and 'function'.",
                "messages[1].role"},
        BadCase{"RoleEmpty", true, R"({"messages": [{"role": "", "content": "b"}]})",
                "'messages[0].role' must not be empty", "messages[0].role"},
        BadCase{"UserContentMissing", true, R"({"messages": [{"role": "user"}]})",
                "'messages[0].content' is required for role 'user'", "messages[0].content"},
        BadCase{"ContentNumber", true, R"({"messages": [{"role": "user", "content": 3}]})",
                "'messages[0].content' must be a string or an array of content parts, got number",
                "messages[0].content"},
        BadCase{"ImagePart", true,
                R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content":
                   [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}]}]})",
                "'messages[1].content[1].type' is 'image_url'; only 'text' content parts",
                "messages[1].content[1].type"},
        BadCase{"PartWithoutType", true, R"({"messages": [{"role": "user", "content": [{}]}]})",
                "'messages[0].content[0].type' is required", "messages[0].content[0].type"},
        BadCase{"PartTextNumber", true,
                R"({"messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]})",
                "'messages[0].content[0].text' must be a string, got number",
                "messages[0].content[0].text"},
        BadCase{"ToolCallsNotArray", true,
                R"({"messages": [{"role": "assistant", "tool_calls": {}}]})",
                "'messages[0].tool_calls' must be an array, got object", "messages[0].tool_calls"},
        BadCase{"ToolCallArgumentsInvalid", true,
                R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type":
                   "function", "function": {"name": "f", "arguments": "{oops"}}]}]})",
                "'messages[0].tool_calls[0].function.arguments' is not valid JSON",
                "messages[0].tool_calls[0].function.arguments"},
        BadCase{"ToolWithoutFunction", true, Chat(R"("tools": [{"type": "function"}])"),
                "'tools[0].function' is required", "tools[0].function"},
        BadCase{"ToolType", true, Chat(R"("tools": [{"type": "retrieval", "function": {}}])"),
                "'tools[0].type' is 'retrieval'; only 'function' tools", "tools[0].type"},
        BadCase{"ToolChoiceRequiredWithoutTools", true, Chat(R"("tool_choice": "required")"),
                "'tool_choice' 'required' needs 'tools' to choose from", "tool_choice"},
        BadCase{"ToolChoiceUnknownFunction", true,
                Chat(R"("tools": [{"type": "function", "function": {"name": "f"}}],
                     "tool_choice": {"type": "function", "function": {"name": "g"}})"),
                "'tool_choice.function.name' is 'g', which is not among the request's 'tools'",
                "tool_choice.function.name"},
        BadCase{"ToolChoiceWord", true,
                Chat(R"("tools": [{"type": "function", "function": {"name": "f"}}],
                     "tool_choice": "any")"),
                "'tool_choice' is 'any'; expected 'none', 'auto', 'required'", "tool_choice"},
        BadCase{"ParallelToolCallsType", true, Chat(R"("parallel_tool_calls": "yes")"),
                "'parallel_tool_calls' must be a boolean, got string", "parallel_tool_calls"},
        BadCase{"ForcedToolWithResponseFormat", true,
                Chat(R"("tools": [{"type": "function", "function": {"name": "f"}}],
                     "tool_choice": "required", "response_format": {"type": "json_object"})"),
                "'response_format' cannot be combined with a forced 'tool_choice'",
                "response_format"},
        BadCase{"ForcedToolWithUnsupportedParameters", true,
                Chat(R"("tools": [{"type": "function", "function": {"name": "f", "parameters":
                     {"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}}}],
                     "tool_choice": "required")"),
                "'tools' cannot be served", "tools"},
        BadCase{"TooManyMessages", true,
                [] {
                  std::string s = R"({"messages": [)";
                  for (int i = 0; i < 4097; ++i) s += R"({"role": "user", "content": ""},)";
                  s.back() = ']';
                  return s + "}";
                }(),
                "'messages' has 4097 entries; the maximum is 4096", "messages"},
        BadCase{"TopLogprobsTooMany", true, Chat(R"("logprobs": true, "top_logprobs": 21)"),
                "'top_logprobs' is 21; the maximum is 20", "top_logprobs"},
        BadCase{"TopLogprobsWithoutLogprobs", true, Chat(R"("top_logprobs": 3)"),
                "'top_logprobs' requires 'logprobs' to be true", "top_logprobs"},
        BadCase{"LogprobsInt", true, Chat(R"("logprobs": 5)"),
                "'logprobs' must be a boolean, got number", "logprobs"},
        BadCase{"MaxCompletionTokensNegative", true, Chat(R"("max_completion_tokens": -1)"),
                "'max_completion_tokens' must be at least 1, got -1", "max_completion_tokens"},
        BadCase{"ContinueAndGenerate", true, Chat(R"("continue_final_message": true)"),
                "cannot both be true", "continue_final_message"},
        BadCase{"ReservedTemplateKwarg", true,
                Chat(R"("chat_template_kwargs": {"add_generation_prompt": false})"),
                "'chat_template_kwargs.add_generation_prompt' is set by the server",
                "chat_template_kwargs.add_generation_prompt"},
        BadCase{"CustomTemplate", true, Chat(R"("chat_template": "{{ x }}")"),
                "'chat_template' is not supported", "chat_template"}),
    [](const auto& info) { return std::string(info.param.name); });

// ---- accepted requests ----

frontdoor::OpenAiRequest ParseOk(bool chat, const std::string& body) {
  absl::StatusOr<frontdoor::OpenAiRequest> r =
      chat ? frontdoor::ParseChatRequest(body, kLimits)
           : frontdoor::ParseCompletionRequest(body, kLimits);
  EXPECT_TRUE(r.ok()) << r.status() << "\n" << body;
  return r.ok() ? *std::move(r) : frontdoor::OpenAiRequest{};
}

TEST(ParseCompletionTest, Defaults) {
  const frontdoor::OpenAiRequest r = ParseOk(false, R"({"prompt": "Hello"})");
  EXPECT_EQ(r.kind, frontdoor::OpenAiRequest::Kind::kCompletion);
  EXPECT_EQ(r.prompt_text, "Hello");
  EXPECT_FALSE(r.prompt_ids.has_value());
  EXPECT_EQ(r.model, "");
  EXPECT_EQ(r.max_tokens, 16);  // OpenAI's and vLLM's default
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.logprobs.has_value());
  EXPECT_TRUE(r.skip_special_tokens);
  EXPECT_FALSE(r.add_special_tokens.has_value());
  EXPECT_TRUE(r.stop.empty());
}

TEST(ParseCompletionTest, ExplicitNullMaxTokensMeansUpToTheContext) {
  EXPECT_FALSE(ParseOk(false, R"({"prompt": "a", "max_tokens": null})").max_tokens.has_value());
  EXPECT_EQ(ParseOk(false, R"({"prompt": "a", "max_tokens": 100})").max_tokens, 100);
}

TEST(ParseCompletionTest, PromptForms) {
  EXPECT_EQ(ParseOk(false, R"({"prompt": ["one"]})").prompt_text, "one");
  EXPECT_EQ(ParseOk(false, R"({"prompt": ""})").prompt_text, "");
  EXPECT_THAT(*ParseOk(false, R"({"prompt": [1, 2, 3]})").prompt_ids, ElementsAre(1, 2, 3));
  EXPECT_THAT(*ParseOk(false, R"({"prompt": [[4, 5.0]]})").prompt_ids, ElementsAre(4, 5));
}

TEST(ParseCompletionTest, AllFields) {
  const frontdoor::OpenAiRequest r = ParseOk(false, R"({
    "model": "m", "prompt": "p", "stream": true, "stream_options": {"include_usage": true},
    "max_tokens": 7, "n": 2, "stop": ["a", "b"], "stop_token_ids": [9], "temperature": 0,
    "top_p": 0.9, "min_p": 0.1, "repetition_penalty": 1.1, "presence_penalty": -0.5,
    "frequency_penalty": 0.5, "top_k": -1, "seed": -1, "logit_bias": {"7": -100, "3": 2.5},
    "logprobs": 3, "echo": false, "ignore_eos": true, "skip_special_tokens": false,
    "include_stop_str_in_output": true, "add_special_tokens": false, "request_id": "abc",
    "priority": -3, "cache_salt": "salt", "user": "u", "prompt_cache_key": "conv-1",
    "best_of": 2, "suffix": null,
    "some_future_field": {"x": [1]}})");
  EXPECT_EQ(r.model, "m");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.n, 2);
  EXPECT_THAT(r.stop, ElementsAre("a", "b"));
  EXPECT_THAT(r.stop_token_ids, ElementsAre(9));
  EXPECT_EQ(r.temperature, 0.0);
  EXPECT_EQ(r.top_p, 0.9);
  EXPECT_EQ(r.min_p, 0.1);
  EXPECT_EQ(r.repetition_penalty, 1.1);
  EXPECT_EQ(r.presence_penalty, -0.5);
  EXPECT_EQ(r.frequency_penalty, 0.5);
  EXPECT_EQ(r.top_k, -1);
  EXPECT_EQ(r.seed, UINT64_MAX);  // -1 wraps
  EXPECT_THAT(r.logit_bias, ElementsAre(Pair(3, 2.5f), Pair(7, -100.0f)));
  EXPECT_EQ(r.logprobs, 3);
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_FALSE(r.skip_special_tokens);
  EXPECT_TRUE(r.include_stop_str_in_output);
  EXPECT_EQ(r.add_special_tokens, false);
  EXPECT_EQ(r.request_id, "abc");
  EXPECT_EQ(r.priority, -3);
  EXPECT_EQ(r.cache_salt, "salt");
  EXPECT_EQ(r.user, "u");
  EXPECT_EQ(r.prompt_cache_key, "conv-1");
}

TEST(ParseCompletionTest, StopAsOneString) {
  EXPECT_THAT(ParseOk(false, Completion(R"("stop": "\n\n")")).stop, ElementsAre("\n\n"));
  EXPECT_TRUE(ParseOk(false, Completion(R"("stop": null)")).stop.empty());
}

TEST(ParseCompletionTest, NullMeansAbsent) {
  const frontdoor::OpenAiRequest r =
      ParseOk(false, Completion(R"("temperature": null, "n": null, "stream": null,
                                   "logprobs": null, "seed": null, "user": null)"));
  EXPECT_FALSE(r.temperature.has_value());
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.logprobs.has_value());
}

TEST(ParseCompletionTest, DuplicateKeysKeepTheLastValue) {
  EXPECT_EQ(ParseOk(false, Completion(R"("n": 20, "n": 2)")).n, 2);
  // "05" and "5" name one token; the later entry wins.
  EXPECT_THAT(ParseOk(false, Completion(R"("logit_bias": {"05": 1, "5": 2})")).logit_bias,
              ElementsAre(Pair(5, 2.0f)));
}

TEST(ParseCompletionTest, IntegralFloatsAreIntegers) {
  EXPECT_EQ(ParseOk(false, Completion(R"("max_tokens": 1e3, "n": 2.0)")).max_tokens, 1000);
}

TEST(ParseCompletionTest, Utf8BomIsSkipped) {
  EXPECT_EQ(ParseOk(false, "\xEF\xBB\xBF" + Completion("")).prompt_text, "hi");
}

TEST(ParseChatTest, Defaults) {
  const frontdoor::OpenAiRequest r = ParseOk(true, Chat(""));
  EXPECT_EQ(r.kind, frontdoor::OpenAiRequest::Kind::kChat);
  EXPECT_FALSE(r.max_tokens.has_value());  // up to the context
  EXPECT_TRUE(r.add_generation_prompt);
  EXPECT_FALSE(r.continue_final_message);
  EXPECT_FALSE(r.logprobs.has_value());
  EXPECT_EQ(Json::parse(frontdoor::DumpJson(r.chat)),
            Json::parse(R"({"messages": [{"role": "user", "content": "hi"}]})"));
}

TEST(ParseChatTest, MaxCompletionTokensWinsOverMaxTokens) {
  EXPECT_EQ(ParseOk(true, Chat(R"("max_tokens": 5, "max_completion_tokens": 9)")).max_tokens, 9);
  EXPECT_EQ(ParseOk(true, Chat(R"("max_tokens": 5)")).max_tokens, 5);
  EXPECT_EQ(ParseOk(true, Chat(R"("max_tokens": 5, "max_completion_tokens": null)")).max_tokens, 5);
}

TEST(ParseChatTest, Logprobs) {
  EXPECT_EQ(ParseOk(true, Chat(R"("logprobs": true)")).logprobs, 0);
  EXPECT_EQ(ParseOk(true, Chat(R"("logprobs": true, "top_logprobs": 20)")).logprobs, 20);
  EXPECT_FALSE(ParseOk(true, Chat(R"("logprobs": false)")).logprobs.has_value());
  // Asking for zero alternatives without logprobs asks for nothing (vLLM accepts it).
  EXPECT_FALSE(ParseOk(true, Chat(R"("top_logprobs": 0)")).logprobs.has_value());
}

TEST(ParseChatTest, MessagesAreNormalisedForTheTemplate) {
  const frontdoor::OpenAiRequest r = ParseOk(true, R"({"messages": [
    {"role": "system", "content": [{"type": "text", "text": "a"}, "b",
                                   {"type": "text", "text": "c"}]},
    {"role": "user", "content": "q", "name": "ann", "extra": 1},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call1", "type": "function", "function": {"name": "f", "arguments": "{\"z\": 1, \"a\": [2]}"}},
      {"id": "call2", "type": "function", "function": {"name": "g", "arguments": ""}}]},
    {"role": "tool", "tool_call_id": "call1", "content": "42"},
    {"role": "assistant", "reasoning_content": "hmm"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": 2}}}]})");
  // Object keys keep the client's order (ordered_json), which tojson in templates shows.
  EXPECT_EQ(
      frontdoor::DumpJson(r.chat),
      R"({"messages":[{"role":"system","content":"a\nb\nc"},)"
      R"({"role":"user","content":"q","name":"ann"},)"
      R"({"role":"assistant","content":"","tool_calls":[)"
      R"({"id":"call1","type":"function","function":{"name":"f","arguments":{"z":1,"a":[2]}}},)"
      R"({"id":"call2","type":"function","function":{"name":"g","arguments":{}}}]},)"
      R"({"role":"tool","content":"42","tool_call_id":"call1"},)"
      R"({"role":"assistant","content":"","reasoning_content":"hmm"}],)"
      R"("tools":[{"type":"function","function":{"name":"f","parameters":{"z":1,"a":2}}}]})");
}

TEST(ParseChatTest, TemplateOptions) {
  const frontdoor::OpenAiRequest r =
      ParseOk(true, Chat(R"("add_generation_prompt": false, "continue_final_message": true,
                    "chat_template_kwargs": {"enable_thinking": false}, "tool_choice": "auto",
                    "response_format": {"type": "text"})"));
  EXPECT_FALSE(r.add_generation_prompt);
  EXPECT_TRUE(r.continue_final_message);
  EXPECT_EQ(frontdoor::DumpJson(r.chat_template_kwargs), R"({"enable_thinking":false})");
}

TEST(ParseChatTest, WhatTheOpenAiSdkSends) {
  // openai-node's chat.completions.create with common options, as it serialises them.
  const frontdoor::OpenAiRequest r =
      ParseOk(true, R"({"model":"baton","messages":[{"role":"developer",
    "content":"Be brief."},{"role":"user","content":"Hi"}],"max_completion_tokens":32,
    "temperature":0.7,"stream":true,"stream_options":{"include_usage":true},"store":false,
    "metadata":null,"parallel_tool_calls":true,"service_tier":"auto","modalities":["text"]})");
  EXPECT_EQ(r.model, "baton");
  EXPECT_EQ(r.max_tokens, 32);
  EXPECT_TRUE(r.include_usage);
}

TEST(ParseTest, LimitsAreConfigurable) {
  frontdoor::ProtocolLimits limits;
  limits.max_n = 2;
  limits.max_stop = 1;
  const absl::StatusOr<frontdoor::OpenAiRequest> r =
      frontdoor::ParseCompletionRequest(Completion(R"("n": 3)"), limits);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("'n' is 3; the maximum is 2"));
  EXPECT_FALSE(frontdoor::ParseCompletionRequest(Completion(R"("stop": ["a", "b"])"), limits).ok());
  limits.max_prompt_token_ids = 2;
  EXPECT_THAT(
      std::string(
          frontdoor::ParseCompletionRequest(R"({"prompt": [1, 2, 3]})", limits).status().message()),
      HasSubstr("'prompt' has 3 token ids; the maximum is 2"));
}

TEST(ParseJsonTextTest, ManyKeysParseInLinearTime) {
  // ordered_json's own parser searches all earlier keys for each new key.
  std::string body = R"({"prompt": "p", "x": {)";
  for (int i = 0; i < 100000; ++i) body += "\"k" + std::to_string(i) + "\":0,";
  body.back() = '}';
  body += "}";
  EXPECT_TRUE(frontdoor::ParseCompletionRequest(body, kLimits).ok());
}

// ---- errors ----

TEST(ApiErrorTest, MapsStatusCodes) {
  struct Case {
    absl::Status status;
    int http;
    std::string type, code;
  };
  const Case cases[] = {
      {absl::InvalidArgumentError("x"), 400, "invalid_request_error", ""},
      {absl::OutOfRangeError("x"), 400, "invalid_request_error", ""},
      {absl::FailedPreconditionError("x"), 400, "invalid_request_error", ""},
      {absl::NotFoundError("x"), 404, "invalid_request_error", ""},
      {absl::UnauthenticatedError("x"), 401, "invalid_request_error", "invalid_api_key"},
      {absl::PermissionDeniedError("x"), 403, "permission_error", ""},
      {absl::ResourceExhaustedError("x"), 429, "requests", "rate_limit_exceeded"},
      {absl::UnavailableError("x"), 503, "server_error", ""},
      {absl::DeadlineExceededError("x"), 504, "server_error", ""},
      {absl::CancelledError("x"), 499, "invalid_request_error", "request_cancelled"},
      {absl::InternalError("x"), 500, "server_error", "internal_error"},
      {absl::UnknownError("x"), 500, "server_error", "internal_error"},
  };
  for (const Case& c : cases) {
    const frontdoor::ApiError e = frontdoor::ToApiError(c.status);
    EXPECT_EQ(e.http_status, c.http) << c.status;
    EXPECT_EQ(e.type, c.type) << c.status;
    EXPECT_EQ(e.code, c.code) << c.status;
    EXPECT_EQ(e.message, "x");
    EXPECT_EQ(e.param, "");
  }
}

TEST(ApiErrorTest, EnvelopeHasNullsForEmptyParamAndCode) {
  const Json j = Json::parse(
      frontdoor::ErrorJson(frontdoor::ToApiError(frontdoor::ParamError("n", "'n' is 40"))));
  EXPECT_EQ(j, Json::parse(R"({"error": {"message": "'n' is 40", "type": "invalid_request_error",
                                         "param": "n", "code": null}})"));
  const Json k = Json::parse(
      frontdoor::ErrorJson(frontdoor::ToApiError(absl::UnauthenticatedError("bad key"))));
  EXPECT_TRUE(k["error"]["param"].is_null());
  EXPECT_EQ(k["error"]["code"], "invalid_api_key");
}

TEST(ApiErrorTest, InvalidUtf8InMessagesIsReplaced) {
  const std::string out =
      frontdoor::ErrorJson(frontdoor::ToApiError(absl::InvalidArgumentError("bad \xFF byte")));
  EXPECT_EQ(Json::parse(out)["error"]["message"], "bad \xEF\xBF\xBD byte");
}

// ---- responses ----

frontdoor::ChoiceOut ChoiceWithLogprobs() {
  frontdoor::ChoiceOut c;
  c.text = "Hi\xC3";  // the second token ends inside a character
  c.has_logprobs = true;
  c.logprobs = {{10, "Hi", -0.25f, {{10, "Hi", -0.25f}, {11, "Yo", -1.5f}}},
                {12, "\xC3", -std::numeric_limits<float>::infinity(), {}}};
  c.text_offset = 5;
  c.finish_reason = "length";
  return c;
}

TEST(ResponseTest, CompletionLogprobsShape) {
  const Json j = Json::parse(frontdoor::CompletionResponseJson(
      "cmpl-1", 1700000000, "m", {ChoiceWithLogprobs()}, {3, 2, 1, std::nullopt, nullptr}));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"], "cmpl-1");
  EXPECT_EQ(j["created"], 1700000000);
  EXPECT_EQ(j["model"], "m");
  const Json& choice = j["choices"][0];
  EXPECT_EQ(choice["index"], 0);
  EXPECT_EQ(choice["text"], "Hi\xEF\xBF\xBD");
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_TRUE(choice["stop_reason"].is_null());
  EXPECT_EQ(choice["logprobs"], Json::parse(R"({
    "tokens": ["Hi", "\ufffd"], "token_logprobs": [-0.25, -9999.0],
    "top_logprobs": [{"Hi": -0.25, "Yo": -1.5}, {}], "text_offset": [5, 7]})"));
  EXPECT_EQ(j["usage"], Json::parse(R"({"prompt_tokens": 3, "completion_tokens": 2,
    "total_tokens": 5, "prompt_tokens_details": {"cached_tokens": 1}})"));
}

TEST(ResponseTest, ChatLogprobsShape) {
  frontdoor::ChoiceOut c = ChoiceWithLogprobs();
  c.finish_reason = "stop";
  c.stop_reason = "###";
  const Json j = Json::parse(frontdoor::ChatResponseJson("chatcmpl-1", 1, "m", {c}, {}));
  EXPECT_EQ(j["object"], "chat.completion");
  const Json& choice = j["choices"][0];
  EXPECT_EQ(choice["message"], Json::parse(R"({"role": "assistant", "content": "Hi\ufffd"})"));
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_EQ(choice["stop_reason"], "###");
  EXPECT_EQ(choice["logprobs"], Json::parse(R"({"content": [
    {"token": "Hi", "logprob": -0.25, "bytes": [72, 105], "top_logprobs": [
      {"token": "Hi", "logprob": -0.25, "bytes": [72, 105]},
      {"token": "Yo", "logprob": -1.5, "bytes": [89, 111]}]},
    {"token": "\ufffd", "logprob": -9999.0, "bytes": [195], "top_logprobs": []}]})"));
  EXPECT_EQ(j["usage"]["total_tokens"], 0);
}

TEST(ResponseTest, NoLogprobsIsNull) {
  frontdoor::ChoiceOut c;
  c.text = "x";
  c.stop_token_id = 7;
  c.finish_reason = "stop";
  const Json chat = Json::parse(frontdoor::ChatResponseJson("i", 1, "m", {c, c}, {}));
  EXPECT_TRUE(chat["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(chat["choices"][0]["stop_reason"], 7);  // vLLM writes a stop token as an integer
  EXPECT_EQ(chat["choices"].size(), 2u);
  const Json completion = Json::parse(frontdoor::CompletionResponseJson("i", 1, "m", {c}, {}));
  EXPECT_TRUE(completion["choices"][0]["logprobs"].is_null());
}

TEST(ResponseTest, ChatChunksCarryTheRoleOnlyFirst) {
  frontdoor::ChoiceOut c;
  c.index = 1;
  const Json first =
      Json::parse(frontdoor::ChatChunkJson("chatcmpl-1", 1, "m", c, /*with_role=*/true));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["index"], 1);
  EXPECT_EQ(first["choices"][0]["delta"], Json::parse(R"({"role": "assistant", "content": ""})"));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(first["choices"][0]["logprobs"].is_null());
  EXPECT_FALSE(first.contains("usage"));

  c.text = "tok";
  const Json middle = Json::parse(frontdoor::ChatChunkJson("chatcmpl-1", 1, "m", c, false));
  EXPECT_EQ(middle["choices"][0]["delta"], Json::parse(R"({"content": "tok"})"));

  c.text.clear();
  c.finish_reason = "length";
  const Json last = Json::parse(frontdoor::ChatChunkJson("chatcmpl-1", 1, "m", c, false));
  EXPECT_EQ(last["choices"][0]["delta"], Json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
}

TEST(ResponseTest, CompletionChunk) {
  frontdoor::ChoiceOut c = ChoiceWithLogprobs();
  const Json j = Json::parse(frontdoor::CompletionChunkJson("cmpl-1", 1, "m", c));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["logprobs"]["text_offset"], Json::parse("[5, 7]"));
}

TEST(ResponseTest, UsageChunks) {
  const Json chat =
      Json::parse(frontdoor::UsageChunkJson(frontdoor::OpenAiRequest::Kind::kChat, "chatcmpl-1", 1,
                                            "m", {10, 4, 8, std::nullopt, nullptr}));
  EXPECT_EQ(chat["object"], "chat.completion.chunk");
  EXPECT_EQ(chat["choices"], Json::array());
  EXPECT_EQ(chat["usage"]["total_tokens"], 14);
  EXPECT_EQ(chat["usage"]["prompt_tokens_details"]["cached_tokens"], 8);
  const Json completion = Json::parse(
      frontdoor::UsageChunkJson(frontdoor::OpenAiRequest::Kind::kCompletion, "cmpl-1", 1, "m", {}));
  EXPECT_EQ(completion["object"], "text_completion");
}

TEST(ResponseTest, TimingsSitBesideUsageOnlyWhenGiven) {
  frontdoor::RequestTimings t;
  t.route_seconds = 0.25;
  t.prefill_seconds = 0.5;
  t.time_to_first_token_seconds = 0.75;
  t.total_seconds = 1.5;
  const Json with =
      Json::parse(frontdoor::ChatResponseJson("chatcmpl-1", 1, "m", {}, {1, 2, 0, t, nullptr}));
  EXPECT_EQ(with["timings"]["route_seconds"], 0.25);
  EXPECT_EQ(with["timings"]["prefill_seconds"], 0.5);
  EXPECT_EQ(with["timings"]["time_to_first_token_seconds"], 0.75);
  EXPECT_EQ(with["timings"]["total_seconds"], 1.5);
  EXPECT_EQ(with["timings"].size(), 9U);
  const Json chunk = Json::parse(frontdoor::UsageChunkJson(
      frontdoor::OpenAiRequest::Kind::kCompletion, "cmpl-1", 1, "m", {1, 2, 0, t, nullptr}));
  EXPECT_EQ(chunk["timings"]["kv_transfer_seconds"], 0.0);
  const Json without = Json::parse(frontdoor::CompletionResponseJson("cmpl-1", 1, "m", {}, {}));
  EXPECT_FALSE(without.contains("timings"));
}

TEST(ResponseTest, Models) {
  const frontdoor::ModelEntry m{"llama", 1700000000, "baton", 4096};
  EXPECT_EQ(Json::parse(frontdoor::ModelJson(m)), Json::parse(R"({"id": "llama", "object": "model",
    "created": 1700000000, "owned_by": "baton", "root": "llama", "parent": null,
    "max_model_len": 4096})"));
  const Json list = Json::parse(frontdoor::ModelListJson({m, m}));
  EXPECT_EQ(list["object"], "list");
  EXPECT_EQ(list["data"].size(), 2u);
  EXPECT_EQ(Json::parse(frontdoor::ModelListJson({}))["data"], Json::array());
}

// The context check names what to shorten, and a max_tokens near 2^63 (which once
// overflowed the sum and passed) is refused like any other too large.
TEST(FitToContextTest, NamesTheParameterAndDoesNotOverflow) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  frontdoor::OpenAiRequest completion;
  completion.max_tokens = kMax;
  absl::StatusOr<int64_t> fit = frontdoor::FitToContext(512, 10, completion);
  ASSERT_FALSE(fit.ok());
  EXPECT_EQ(fit.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(frontdoor::ParamOf(fit.status()), "max_tokens");
  EXPECT_THAT(std::string(fit.status().message()),
              HasSubstr(StrCat("you requested ", kMax, " tokens (10 in the prompt, ", kMax,
                               " in the completion)")));

  completion.max_tokens = 502;  // exactly the rest of the context
  EXPECT_EQ(frontdoor::FitToContext(512, 10, completion).value_or(-1), 502);
  completion.max_tokens = 503;
  EXPECT_EQ(frontdoor::ParamOf(frontdoor::FitToContext(512, 10, completion).status()),
            "max_tokens");
  completion.max_tokens.reset();
  EXPECT_EQ(frontdoor::FitToContext(512, 10, completion).value_or(-1), 502);
  EXPECT_EQ(frontdoor::ParamOf(frontdoor::FitToContext(512, 512, completion).status()), "prompt");
  EXPECT_EQ(frontdoor::ParamOf(frontdoor::FitToContext(512, 0, completion).status()), "prompt");

  absl::StatusOr<frontdoor::OpenAiRequest> chat = frontdoor::ParseChatRequest(
      R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 600})",
      kLimits);
  ASSERT_TRUE(chat.ok()) << chat.status();
  fit = frontdoor::FitToContext(512, 10, *chat);
  EXPECT_EQ(frontdoor::ParamOf(fit.status()), "max_completion_tokens");
  EXPECT_THAT(std::string(fit.status().message()),
              HasSubstr("(10 in the messages, 600 in the completion)"));
  EXPECT_EQ(frontdoor::ParamOf(frontdoor::FitToContext(512, 600, *chat).status()), "messages");
}

}  // namespace
}  // namespace baton::router
