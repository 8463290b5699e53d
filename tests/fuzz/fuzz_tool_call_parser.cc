// Tool-call parsing (toolcall/): for every format, the input parsed whole must equal the
// input streamed in fragments (split points taken from the input itself), and every call
// returned must carry a JSON object as its arguments. A small held-back bound is used too,
// so the fuzzer reaches the bound's paths with short inputs.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"
#include "toolcall/tool_call_parser.h"

namespace {

using baton::toolcall::Format;
using baton::toolcall::ParsedOutput;
using baton::toolcall::StreamDelta;
using baton::toolcall::ToolCall;
using baton::toolcall::ToolCallParser;

constexpr Format kFormats[] = {Format::kHermes,      Format::kLlama3Json, Format::kMistral,
                               Format::kFunctionary, Format::kCommandR,   Format::kDeepSeekR1,
                               Format::kFirefunction};

void Check(bool ok) {
  if (!ok) std::abort();
}

void Add(const StreamDelta& delta, ParsedOutput* out) {
  out->content += delta.content;
  for (const auto& call : delta.calls) {
    if (call.index == static_cast<int>(out->calls.size())) {
      Check(!call.name.empty());
      out->calls.push_back(ToolCall{call.name, call.arguments});
    } else {
      Check(call.index + 1 == static_cast<int>(out->calls.size()) && call.name.empty());
      out->calls.back().arguments += call.arguments;
    }
  }
}

void CheckFormat(Format format, size_t max_held, std::string_view split_seed,
                 std::string_view text) {
  auto parser = ToolCallParser::Create(format, max_held);
  ParsedOutput whole = parser->Parse(text);
  for (const ToolCall& call : whole.calls) {
    Check(!call.name.empty());
    nlohmann::json arguments = nlohmann::json::parse(call.arguments, nullptr, false);
    Check(!arguments.is_discarded() && arguments.is_object());
  }
  ParsedOutput streamed;
  size_t pos = 0;
  size_t i = 0;
  while (pos < text.size()) {
    // 1..16 bytes, never 0, so the loop always advances.
    size_t n =
        split_seed.empty() ? 1 : 1 + static_cast<uint8_t>(split_seed[i++ % split_seed.size()]) % 16;
    n = std::min(n, text.size() - pos);
    Add(parser->Feed(text.substr(pos, n)), &streamed);
    pos += n;
  }
  Add(parser->Finish(), &streamed);
  Check(streamed == whole);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The first bytes (up to the first NUL, at most 8) choose fragment sizes; the rest is text.
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t cut = std::min<size_t>(input.find('\0'), 8);
  std::string_view seed = input.substr(0, std::min(cut, input.size()));
  std::string_view text = cut < input.size() ? input.substr(cut + 1) : input;
  for (Format format : kFormats) {
    CheckFormat(format, ToolCallParser::kDefaultMaxHeldBytes, seed, text);
    CheckFormat(format, 48, seed, text);
  }
  return 0;
}
