// Members of values: the methods and properties `x.name` finds on strings, lists and
// dicts when the value itself has no such key.
#pragma once

#include <optional>
#include <string_view>

#include "template/jinja_value.h"

namespace baton::templating::jinja {

// The `builtins` of a value: `"x".upper`, `[1].length`, `d.items`. nullopt when the
// value has no such member.
std::optional<Value> LookupBuiltin(const Value& object, std::string_view name);

}  // namespace baton::templating::jinja
