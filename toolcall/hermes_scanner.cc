// Hermes 2 Pro / Hermes 3 / Qwen2.5 / Qwen3: each call is
//   <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
// possibly several, after optional content (Qwen3's <think>...</think> stays content).
#include "toolcall/call_json.h"
#include "toolcall/marker_scanner.h"

namespace baton::toolcall::internal {
namespace {

constexpr std::string_view kStart = "<tool_call>";
constexpr std::string_view kEnd = "</tool_call>";

class HermesScanner : public MarkerScanner {
 public:
  HermesScanner() : MarkerScanner({kStart}) {}

 private:
  ScanStep ReadCall(BodyReader& r) override {
    std::string_view json;
    if (!r.Literal(kStart) || !r.Ws() || !r.Json("{", &json) || !r.Ws() || !r.Literal(kEnd)) {
      return r.Stop();
    }
    std::optional<nlohmann::json> value = ParseJson(json);
    if (!value) return ScanStep::Content(r.pos());
    // Hermes's template says "arguments"; some fine-tunes write "parameters".
    std::optional<ToolCall> call = CallFromObject(*value, "name", {"arguments", "parameters"});
    if (!call) return ScanStep::Content(r.pos());
    return ScanStep::Calls(r.pos(), {std::move(*call)});
  }
};

}  // namespace

std::unique_ptr<FormatScanner> NewHermesScanner() { return std::make_unique<HermesScanner>(); }

}  // namespace baton::toolcall::internal
