// Firefunction v2: " functools[{"name": "f", "arguments": {...}}, ...]" after optional
// content, no closing marker (the template's system prompt says so).
#include "toolcall/call_json.h"
#include "toolcall/marker_scanner.h"

namespace baton::toolcall::internal {
namespace {

constexpr std::string_view kStart = "functools";

class FirefunctionScanner : public MarkerScanner {
 public:
  FirefunctionScanner() : MarkerScanner({kStart}) {}

 private:
  ScanStep ReadCall(BodyReader& r) override {
    std::string_view json;
    if (!r.Literal(kStart) || !r.Ws() || !r.Json("[", &json)) return r.Stop();
    std::optional<nlohmann::json> value = ParseJson(json);
    if (!value) return ScanStep::Content(r.pos());
    std::optional<std::vector<ToolCall>> calls = CallsFromJson(*value, "name", {"arguments"});
    if (!calls) return ScanStep::Content(r.pos());
    return ScanStep::Calls(r.pos(), std::move(*calls));
  }
};

}  // namespace

std::unique_ptr<FormatScanner> NewFirefunctionScanner() {
  return std::make_unique<FirefunctionScanner>();
}

}  // namespace baton::toolcall::internal
