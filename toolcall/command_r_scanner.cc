// Command R+: after optional content (a plan), the actions as a fenced JSON list:
//   Action: ```json
//   [{"tool_name": "f", "parameters": {...}}, ...]
//   ```
// `directly_answer` (the template's prompt spells it `directly-answer`) is Cohere's way of
// saying "no tool": such entries are not calls, and a list of only those stays content.
#include "toolcall/call_json.h"
#include "toolcall/marker_scanner.h"

namespace baton::toolcall::internal {
namespace {

constexpr std::string_view kStart = "Action:";
constexpr std::string_view kFence = "```";

bool IsDirectAnswer(std::string_view name) {
  return name == "directly_answer" || name == "directly-answer";
}

class CommandRScanner : public MarkerScanner {
 public:
  CommandRScanner() : MarkerScanner({kStart}) {}

 private:
  ScanStep ReadCall(BodyReader& r) override {
    bool fenced = false;
    bool tagged = false;
    std::string_view json;
    if (!r.Literal(kStart) || !r.Ws() || !r.OptionalLiteral(kFence, &fenced)) return r.Stop();
    if (fenced && !r.OptionalLiteral("json", &tagged)) return r.Stop();
    if (!r.Ws() || !r.Json("[", &json)) return r.Stop();
    if (fenced && (!r.Ws() || !r.Literal(kFence))) return r.Stop();
    std::optional<nlohmann::json> value = ParseJson(json);
    if (!value) return ScanStep::Content(r.pos());
    std::optional<std::vector<ToolCall>> calls =
        CallsFromJson(*value, "tool_name", {"parameters", "arguments"});
    if (!calls) return ScanStep::Content(r.pos());
    std::erase_if(*calls, [](const ToolCall& call) { return IsDirectAnswer(call.name); });
    if (calls->empty()) return ScanStep::Content(r.pos());
    return ScanStep::Calls(r.pos(), std::move(*calls));
  }
};

}  // namespace

std::unique_ptr<FormatScanner> NewCommandRScanner() { return std::make_unique<CommandRScanner>(); }

}  // namespace baton::toolcall::internal
