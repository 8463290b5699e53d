// Functionary v3.1 (Llama 3.1 based): each call is <function=NAME>{...}</function>; the
// python tool is <|python_tag|> followed by raw code up to the end of the output, which
// becomes name "python", arguments {"code": ...} (as the template renders it back).
#include "toolcall/call_json.h"
#include "toolcall/marker_scanner.h"

namespace baton::toolcall::internal {
namespace {

constexpr std::string_view kFunction = "<function=";
constexpr std::string_view kFunctionEnd = "</function>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

class FunctionaryScanner : public MarkerScanner {
 public:
  FunctionaryScanner() : MarkerScanner({kFunction, kPythonTag}) {}

 private:
  ScanStep ReadCall(BodyReader& r) override {
    if (MarkerAtStart(r.text()) == kPythonTag) return ReadPython(r);
    std::string_view name;
    std::string_view json;
    if (!r.Literal(kFunction) || !r.Name(&name) || !r.Literal(">") || !r.Ws() ||
        !r.Json("{", &json) || !r.Ws() || !r.Literal(kFunctionEnd)) {
      return r.Stop();
    }
    std::optional<nlohmann::json> value = ParseJson(json);
    if (!value || !value->is_object()) return ScanStep::Content(r.pos());
    return ScanStep::Calls(r.pos(), {ToolCall{std::string(name), DumpJson(*value)}});
  }

  // The code runs to the end of the output, so it is known only then.
  static ScanStep ReadPython(BodyReader& r) {
    if (!r.Literal(kPythonTag)) return r.Stop();
    if (!r.final()) {
      r.NeedMore();
      return r.Stop();
    }
    std::string_view code = r.Rest();
    if (code.find_first_not_of(" \t\r\n") == std::string_view::npos) {
      return ScanStep::Content(r.text().size());
    }
    nlohmann::json arguments = {{"code", std::string(code)}};
    return ScanStep::Calls(r.text().size(), {ToolCall{"python", DumpJson(arguments)}});
  }
};

}  // namespace

std::unique_ptr<FormatScanner> NewFunctionaryScanner() {
  return std::make_unique<FunctionaryScanner>();
}

}  // namespace baton::toolcall::internal
