// CompileJsonSchema: the supported subset compiles, everything else is refused with a
// message naming the construct and its JSON pointer, and the limits hold.
#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/unit/grammar/schema_corpus.h"

namespace baton::grammar {
namespace {

TEST(JsonSchemaTest, CorpusCompiles) {
  for (const auto& [name, schema] : testing::SchemaCorpus()) {
    auto g = CompileJsonSchema(schema);
    EXPECT_TRUE(g.ok()) << name << ": " << g.status();
  }
}

TEST(JsonSchemaTest, SupportedConstructsCompile) {
  for (const char* schema : {
           R"(true)",
           R"({"type":"null"})",
           R"({"type":["string","null"]})",
           R"({"type":"number","title":"t","description":"d","default":1,"examples":[1],
               "$comment":"c","$schema":"https://json-schema.org/draft/2020-12/schema",
               "$id":"x","strict":true})",
           R"({"type":"string","format":"date-time"})",
           R"({"type":"string","minLength":3,"maxLength":3})",
           R"({"type":"string","minLength":4})",
           R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
           R"({"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991})",
           R"({"type":["integer","null"],"exclusiveMinimum":0})",
           R"({"type":"integer","maximum":18446744073709551615,"minimum":-1e300})",
           R"({"type":"array","prefixItems":[{"type":"integer"}]})",
           R"({"type":"array","uniqueItems":false})",
           R"({"type":"object","properties":{},"additionalProperties":false})",
           R"({"allOf":[{"type":"boolean"}]})",
           R"({"const":{"a":[1,2]}})",
           R"({"enum":["x",1,null],"type":"string"})",
           R"({"$defs":{"a":{"type":"string"}},"$ref":"#/$defs/a","description":"d"})",
           R"({"properties":{"a/b~c":{"type":"integer"}},"definitions":{"x":{"$ref":"#"}}})",
       }) {
    auto g = CompileJsonSchema(schema);
    EXPECT_TRUE(g.ok()) << schema << ": " << g.status();
  }
}

void ExpectRefused(const char* schema, const std::string& needle, const SchemaLimits& limits = {}) {
  auto g = CompileJsonSchema(schema, limits);
  ASSERT_FALSE(g.ok()) << schema;
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(g.status().message()).find(needle), std::string::npos)
      << "'" << g.status().message() << "' lacks '" << needle << "'";
}

TEST(JsonSchemaTest, UnsupportedConstructsNameThemselvesAndWhere) {
  ExpectRefused(R"({"type":"object","properties":{"when":{"type":"string","format":"hostname"}}})",
                "schema/properties/when/format: 'format' 'hostname' is not supported (supported: "
                "date-time, date, time, uuid)");
  ExpectRefused(R"({"type":"string","pattern":"^a+$"})", "schema: 'pattern' is not supported");
  ExpectRefused(R"({"type":"object","properties":{"a":{"not":{"type":"string"}}}})",
                "schema/properties/a: 'not' is not supported");
  ExpectRefused(R"({"items":{"if":{},"then":{}}})", "schema/items: 'if' is not supported");
  ExpectRefused(R"({"patternProperties":{"x":{}}})",
                "schema: 'patternProperties' is not supported");
  ExpectRefused(R"({"oneOf":[{"type":"string"}]})", "schema: 'oneOf' is not supported");
  ExpectRefused(R"({"type":"number","maximum":1.5})", "schema: 'maximum' is not supported");
  ExpectRefused(R"({"type":["integer","number"],"minimum":0})",
                "schema: 'minimum' is not supported");
  ExpectRefused(R"({"exclusiveMinimum":0})", "schema: 'exclusiveMinimum' is not supported");
  ExpectRefused(R"({"type":"integer","multipleOf":2})", "schema: 'multipleOf' is not supported");
  ExpectRefused(R"({"type":"integer","minimum":5,"maximum":4})",
                "schema: the range of 'minimum'/'maximum' contains no integer");
  ExpectRefused(R"({"type":"integer","exclusiveMinimum":4,"exclusiveMaximum":5})",
                "schema: the range of 'minimum'/'maximum' contains no integer");
  ExpectRefused(R"({"type":"integer","minimum":4.2,"maximum":4.8})",
                "schema: the range of 'minimum'/'maximum' contains no integer");
  ExpectRefused(R"({"type":"integer","minimum":100000000000000000})",
                "contains no integer of at most 16 digits");
  ExpectRefused(R"({"items":{"type":"integer","maximum":"7"}})",
                "schema/items/maximum: 'maximum' must be a number");
  ExpectRefused(R"({"type":"object","additionalProperties":true})",
                "schema/additionalProperties: 'additionalProperties' other than false");
  ExpectRefused(R"({"type":"object","additionalProperties":{"type":"string"}})",
                "schema/additionalProperties");
  ExpectRefused(R"({"type":"date"})", "schema/type: 'type' 'date' is not supported");
  ExpectRefused(R"({"$ref":"https://example.com/s.json"})", "schema/$ref: '$ref'");
  ExpectRefused(R"({"$ref":"#/$defs/missing"})", "does not resolve");
  ExpectRefused(
      R"({"anyOf":[{"$ref":"#/$defs/p~1q"}],"$defs":{"p/q":{"type":"string","pattern":"x"}}})",
      "schema/$defs/p~1q: 'pattern' is not supported");
  ExpectRefused(R"({"type":"object","properties":{"a":{}},"required":["b"]})",
                "schema/required: 'required' names 'b', which is not in 'properties'");
  ExpectRefused(R"({"type":"array","uniqueItems":true})", "schema/uniqueItems");
  ExpectRefused(R"({"type":"array","items":[{"type":"string"}]})", "schema/items");
  ExpectRefused(R"({"allOf":[{},{}]})", "schema/allOf");
  ExpectRefused(R"({"type":"string","minLength":5,"maxLength":2})", "'minLength' is greater");
  ExpectRefused(R"({"enum":[1,2],"type":"string"})", "no value of 'enum'");
  ExpectRefused(R"(false)", "schema: the schema 'false' accepts no document");
  ExpectRefused(R"({"$ref":"#"})", "schema: accepts no document");
  ExpectRefused(
      R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"})",
      "refers to itself");
  ExpectRefused(R"([1])", "schema: a schema must be an object or a boolean");
  ExpectRefused(R"({"type": "string",)", "not valid JSON");
  ExpectRefused(R"({"$ref":"#/$defs/a","type":"string","$defs":{"a":{}}})",
                "'$ref' with sibling keyword 'type'");
}

TEST(JsonSchemaTest, LimitsNameTheirBound) {
  SchemaLimits small;
  small.max_schema_bytes = 10;
  ExpectRefused(R"({"type":"string"})", "exceeds max_schema_bytes (10)", small);

  std::string deep = R"({"type":"string"})";
  for (int i = 0; i < 40; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  auto g = CompileJsonSchema(deep);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(std::string(g.status().message()).find("max_depth (32)"), std::string::npos)
      << g.status();

  SchemaLimits rules;
  rules.max_rules = 200;
  ExpectRefused(R"({"type":"string","maxLength":500})", "max_rules (200)", rules);
  ExpectRefused(R"({"type":"array","minItems":100000})", "max_rules (10000)");
  ExpectRefused(R"({"type":"array","maxItems":18446744073709551615})", "max_rules (10000)");
  ExpectRefused(R"({"type":"string","maxLength":9223372036854775807})", "max_rules (10000)");
  ExpectRefused(R"({"type":"string","minLength":-1})", "'minLength' must be a non-negative");
  EXPECT_TRUE(CompileJsonSchema(R"({"type":"string","maxLength":100})", rules).ok());
}

TEST(JsonSchemaTest, JsonObjectGrammarIsShared) {
  EXPECT_EQ(JsonObjectGrammar(), JsonObjectGrammar());
  EXPECT_GT(JsonObjectGrammar()->num_rules(), 0);
}

}  // namespace
}  // namespace baton::grammar
