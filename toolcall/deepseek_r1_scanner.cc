// DeepSeek-R1 distills (and DeepSeek V3): after optional content (the <think> part), a block
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//   ```json
//   {...}
//   ```<｜tool▁call▁end｜>
//   <｜tool▁call▁begin｜>...<｜tool▁call▁end｜><｜tool▁calls▁end｜>
// (the strings the templates render). Each call is emitted when its own end marker is in;
// the block's begin marker goes with the first call and its end marker with the last, so
// a call inside a block that is never closed still counts.
#include "toolcall/call_json.h"
#include "toolcall/marker_scanner.h"

namespace baton::toolcall::internal {
namespace {

constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kSep = "<｜tool▁sep｜>";

class DeepSeekR1Scanner : public MarkerScanner {
 public:
  DeepSeekR1Scanner() : MarkerScanner({kCallsBegin, kCallBegin}) {}

 private:
  ScanStep ReadCall(BodyReader& r) override {
    bool block = false;
    bool fenced = false;
    bool tagged = false;
    bool block_end = false;
    std::string_view type;
    std::string_view name;
    std::string_view json;
    if (!r.OptionalLiteral(kCallsBegin, &block) || (block && !r.Ws()) || !r.Literal(kCallBegin) ||
        !r.Name(&type) || !r.Literal(kSep) || !r.Name(&name) || !r.Ws() ||
        !r.OptionalLiteral(kFence(), &fenced)) {
      return r.Stop();
    }
    if (fenced && !r.OptionalLiteral("json", &tagged)) return r.Stop();
    if (!r.Ws() || !r.Json("{", &json)) return r.Stop();
    if (fenced && (!r.Ws() || !r.Literal(kFence()))) return r.Stop();
    if (!r.Ws() || !r.Literal(kCallEnd) || !r.Ws() || !r.OptionalLiteral(kCallsEnd, &block_end)) {
      return r.Stop();
    }
    std::optional<nlohmann::json> value = ParseJson(json);
    if (!value || !value->is_object()) return ScanStep::Content(r.pos());
    return ScanStep::Calls(r.pos(), {ToolCall{std::string(name), DumpJson(*value)}});
  }

  static constexpr std::string_view kFence() { return "```"; }
};

}  // namespace

std::unique_ptr<FormatScanner> NewDeepSeekR1Scanner() {
  return std::make_unique<DeepSeekR1Scanner>();
}

}  // namespace baton::toolcall::internal
