// Loads arbitrary bytes as a tokenizer.json (with a fixed tokenizer_config.json); what
// loads must encode and decode without crashing.
#include <cstdint>
#include <string_view>

#include "nlohmann/json.hpp"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace baton::tokenizer;  // NOLINT(google-build-using-namespace)
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static const nlohmann::json config = {{"add_bos_token", true}, {"bos_token", "<s>"}};
  for (const nlohmann::json* cfg : {&config, static_cast<const nlohmann::json*>(nullptr)}) {
    auto vocab = VocabFromTokenizerJson(text, cfg ? *cfg : nlohmann::json(), "fuzz.json");
    if (!vocab.ok()) continue;
    auto tok = Tokenizer::Create(std::move(*vocab));
    if (!tok.ok()) continue;
    auto ids = (*tok)->Encode("Hello world <s> caf\xC3\xA9 \xF0\x9F\xA6\x99 123\n\t x");
    if (ids.ok()) (void)(*tok)->Decode(*ids);
  }
  return 0;
}
