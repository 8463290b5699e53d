// JSON schema → Grammar, for OpenAI's response_format json_schema / json_object and for
// tool calls. The supported subset, and the bounds the grammar adds (whitespace, number
// length), are in docs/structured_outputs.md.
//
//   BATON_ASSIGN_OR_RETURN(auto grammar, grammar::CompileJsonSchema(schema_text));
//   BATON_ASSIGN_OR_RETURN(auto bound, grammar::TokenGrammar::Create(grammar, vocab));
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "grammar/grammar.h"

namespace baton::grammar {

struct SchemaLimits {
  size_t max_schema_bytes = 64 * 1024;
  int max_depth = 32;        // nesting of schemas
  size_t max_rules = 10000;  // size of the compiled grammar
};

// Compiles a JSON schema (text) into a grammar of the JSON documents it accepts.
// InvalidArgument for anything outside the supported subset, naming the construct and
// where it is as a JSON pointer: "schema/properties/when: 'format' 'hostname' is not
// supported (supported: date-time, date, time, uuid)". Also for bad JSON, limits exceeded
// (names the limit and the bound).
absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonSchema(std::string_view schema_json,
                                                                 const SchemaLimits& limits = {});

// Any JSON object (response_format json_object).
std::shared_ptr<const Grammar> JsonObjectGrammar();

}  // namespace baton::grammar
