// Built-in names of the Jinja runtime: global functions (namespace, range,
// raise_exception, strftime_now) and the `is` tests. Semantics follow @huggingface/jinja;
// Baton-only additions are marked.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "template/jinja_interpreter.h"
#include "template/jinja_methods.h"
#include "template/jinja_value.h"

namespace baton::templating::jinja {

Value MakeFunction(std::string name, NativeFn fn);

// Declares the globals every render starts with.
void SetupGlobals(Env& env);
// Names SetupGlobals() declares; a render context may not redefine them.
bool IsGlobalName(std::string_view name);

// Runs test `name` (`x is name(args...)`); an unknown test is an error.
absl::StatusOr<bool> RunTest(std::string_view name, const Value& operand, const Args& args);

// `x in seq` where seq is a list, string or dict (shared by the operator and the `in` test).
absl::StatusOr<bool> Contains(const Value& container, const Value& item);

// The items of a list, or the keys of a dict, as for-loops see them; nullopt for anything
// else (the reference does not iterate strings).
std::optional<std::vector<Value>> IterableItems(const Value& v);

}  // namespace baton::templating::jinja
