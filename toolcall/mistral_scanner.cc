// Mistral. Tokenizers up to v3/Tekken (Mistral 7B v0.3, Nemo): one marker and a JSON array,
//   [TOOL_CALLS][{"name": "f", "arguments": {...}, "id": "abcdefghi"}, ...]
// (the Nemo template renders exactly that). Tokenizer v11+ (Mistral Small 3.1+, Devstral):
// one marker per call, the name in the clear and the arguments object after [ARGS],
//   [TOOL_CALLS]f[ARGS]{...}[TOOL_CALLS]g[ARGS]{...}
// with an optional [CALL_ID]id before [ARGS] in later tokenizers.
#include "toolcall/call_json.h"
#include "toolcall/marker_scanner.h"

namespace baton::toolcall::internal {
namespace {

constexpr std::string_view kStart = "[TOOL_CALLS]";
constexpr std::string_view kArgs = "[ARGS]";
constexpr std::string_view kCallId = "[CALL_ID]";

class MistralScanner : public MarkerScanner {
 public:
  MistralScanner() : MarkerScanner({kStart}) {}

 private:
  ScanStep ReadCall(BodyReader& r) override {
    int next = 0;
    if (!r.Literal(kStart) || !r.Ws() || !r.PeekOrEnd(&next)) return r.Stop();
    std::string_view json;
    if (next == '[' || next == '{') {
      if (!r.Json("[{", &json)) return r.Stop();
      std::optional<nlohmann::json> value = ParseJson(json);
      if (!value) return ScanStep::Content(r.pos());
      std::optional<std::vector<ToolCall>> calls = CallsFromJson(*value, "name", {"arguments"});
      if (!calls) return ScanStep::Content(r.pos());
      return ScanStep::Calls(r.pos(), std::move(*calls));
    }
    std::string_view name;
    bool has_id = false;
    if (!r.Name(&name) || !r.OptionalLiteral(kCallId, &has_id)) return r.Stop();
    std::string_view id;
    if (has_id && !r.Name(&id)) return r.Stop();
    if (!r.Literal(kArgs) || !r.Json("{", &json)) return r.Stop();
    std::optional<nlohmann::json> value = ParseJson(json);
    if (!value || !value->is_object()) return ScanStep::Content(r.pos());
    return ScanStep::Calls(r.pos(), {ToolCall{std::string(name), DumpJson(*value)}});
  }
};

}  // namespace

std::unique_ptr<FormatScanner> NewMistralScanner() { return std::make_unique<MistralScanner>(); }

}  // namespace baton::toolcall::internal
