#include "frontdoor/openai/openai_json.h"

#include <cstddef>
#include <exception>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/strings.h"
#include "common/utf8.h"

namespace baton::frontdoor {
namespace {

using Json = nlohmann::ordered_json;

// A SAX handler that builds the DOM like nlohmann's own parser, with two differences that
// matter for untrusted input. It bounds nesting, so that later recursive walks (dump,
// templates, copies) cannot overflow the stack. And it appends object keys without
// ordered_map's linear duplicate search, which would make a body with many keys quadratic;
// duplicates are resolved once per object when it closes.
class DomBuilder {
 public:
  explicit DomBuilder(int max_depth) : max_depth_(max_depth) {}

  bool null() { return Add(Json(nullptr)); }
  bool boolean(bool v) { return Add(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return Add(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return Add(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t& /*text*/) { return Add(Json(v)); }
  bool string(Json::string_t& v) { return Add(Json(std::move(v))); }
  bool binary(Json::binary_t& /*v*/) {
    error_ = "binary values are not JSON";  // only the binary formats produce these
    return false;
  }
  bool start_object(std::size_t /*elements*/) { return Open(Json::object()); }
  bool start_array(std::size_t /*elements*/) { return Open(Json::array()); }
  bool key(Json::string_t& k) {
    // ordered_map is a std::vector of pairs; emplace_back skips its duplicate search.
    Json::object_t& object = *stack_.back()->get_ptr<Json::object_t*>();
    object.emplace_back(std::move(k), nullptr);
    pending_ = &object.back().second;
    return true;
  }
  bool end_object() {
    Dedupe(stack_.back()->get_ptr<Json::object_t*>());
    stack_.pop_back();
    return true;
  }
  bool end_array() {
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const nlohmann::json::exception& ex) {
    // what() is "[json.exception.parse_error.101] parse error at line 1, column 5: ...".
    std::string_view message = ex.what();
    if (const size_t end = message.find("] "); end != std::string_view::npos) {
      message.remove_prefix(end + 2);
    }
    // nlohmann counts the bytes read, including the offending one.
    error_ = StrCat(message, " (byte ", position > 0 ? position - 1 : 0, ")");
    syntax_error_ = true;
    return false;
  }

  Json& root() { return root_; }
  const std::string& error() const { return error_; }
  bool syntax_error() const { return syntax_error_; }

 private:
  // Stores `value` where the parser is (the root, the next array element or the value of
  // the last key) and returns where it went.
  Json* Place(Json&& value) {
    if (stack_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Json& top = *stack_.back();
    if (top.is_array()) {
      Json::array_t& array = *top.get_ptr<Json::array_t*>();
      array.push_back(std::move(value));
      return &array.back();
    }
    *pending_ = std::move(value);
    return pending_;
  }
  bool Add(Json&& value) {
    Place(std::move(value));
    return true;
  }
  bool Open(Json&& container) {
    if (static_cast<int>(stack_.size()) >= max_depth_) {
      error_ = StrCat("nests arrays and objects deeper than ", max_depth_, " levels");
      return false;
    }
    // The pointer stays valid: a container gets no new elements while a child is open.
    stack_.push_back(Place(std::move(container)));
    return true;
  }

  static void Dedupe(Json::object_t* object) {
    if (object->size() < 2) return;
    std::unordered_map<std::string_view, size_t> first;  // key -> index in `unique`
    first.reserve(object->size());
    bool duplicates = false;
    for (const auto& [k, v] : *object) {
      if (!first.emplace(k, first.size()).second) {
        duplicates = true;
        break;
      }
    }
    if (!duplicates) return;
    first.clear();
    Json::object_t unique;
    for (auto& [k, v] : *object) {
      auto [it, inserted] = first.emplace(k, unique.size());
      if (inserted) {
        unique.emplace_back(k, std::move(v));
      } else {
        (unique.begin() + static_cast<std::ptrdiff_t>(it->second))->second = std::move(v);
      }
    }
    // `first` points into *object's keys; it is not used after this.
    *object = std::move(unique);
  }

  int max_depth_;
  Json root_;
  std::vector<Json*> stack_;
  Json* pending_ = nullptr;
  std::string error_;
  bool syntax_error_ = false;
};

}  // namespace

size_t FirstInvalidUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const size_t start = pos;
    char32_t cp;
    if (!DecodeUtf8(text, &pos, &cp)) return start;
  }
  return std::string_view::npos;
}

absl::StatusOr<Json> ParseJsonText(std::string_view text, int max_depth, std::string_view what) {
  if (const size_t bad = FirstInvalidUtf8(text); bad != std::string_view::npos) {
    return absl::InvalidArgumentError(StrCat(what, " is not valid UTF-8 at byte ", bad));
  }
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return absl::InvalidArgumentError(StrCat(what, " is empty"));
  }
  DomBuilder builder(max_depth);
  bool ok = false;
  try {
    ok = Json::sax_parse(text.begin(), text.end(), &builder, Json::input_format_t::json,
                         /*strict=*/true);
  } catch (const std::exception& e) {
    // The handler turns parse errors into `false`; anything else (allocation) ends here.
    return absl::InvalidArgumentError(StrCat(what, " could not be parsed: ", e.what()));
  }
  if (!ok) {
    if (builder.syntax_error()) {
      return absl::InvalidArgumentError(StrCat(what, " is not valid JSON: ", builder.error()));
    }
    return absl::InvalidArgumentError(StrCat(what, " ", builder.error()));
  }
  return std::move(builder.root());
}

std::string DumpJson(const Json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string_view JsonTypeName(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return "number";
    case Json::value_t::string:
      return "string";
    case Json::value_t::array:
      return "array";
    case Json::value_t::object:
      return "object";
    default:
      return "binary";
  }
}

}  // namespace baton::frontdoor
