// Fuzzes CompileJsonSchema: arbitrary bytes as a schema must only ever return a status.
// When a schema compiles, a short random walk (seeded by the input) over a vocabulary of
// every single byte plus a few multi-byte tokens checks the matcher's promises: the mask
// equals the uncached mask and brute force, every masked token is accepted, and a live
// state always allows some token (every single byte is a token, so a dead end would be a
// grammar that cannot finish).
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "grammar/token_grammar.h"
#include "grammar/token_vocab.h"

namespace {

using namespace baton::grammar;

void Require(bool cond) {
  if (!cond) std::abort();
}

std::shared_ptr<const TokenVocab> Vocab() {
  static const auto* vocab = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    for (const char* t : {"{\"", "\":", "\", \"", "true", "null", "12", "\xc3\xa9", "\"}", "]}",
                          " {", "\n  ", "\\u00", "-0."}) {
      bytes.push_back(t);
    }
    std::vector<bool> special(bytes.size(), false);
    bytes.push_back("<eos>");
    special.push_back(true);
    return new std::shared_ptr<const TokenVocab>(*MakeTokenVocab(bytes, special));
  }();
  return *vocab;
}

bool Has(const std::vector<uint32_t>& mask, int32_t id) { return (mask[id >> 5] >> (id & 31)) & 1; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  SchemaLimits limits;
  limits.max_rules = 2000;  // keeps each input fast; the bound itself is what is checked
  auto grammar = CompileJsonSchema(text, limits);
  if (!grammar.ok()) {
    Require(grammar.status().code() == absl::StatusCode::kInvalidArgument);
    Require(!grammar.status().message().empty());
    return 0;
  }
  auto tg = TokenGrammar::Create(*grammar, Vocab());
  Require(tg.ok());
  GrammarMatcher m(*tg);
  const int32_t n = m.vocab_size();
  std::vector<uint32_t> mask((*tg)->mask_words()), uncached(mask.size());
  uint64_t rng = 0x9e3779b97f4a7c15ull ^ size;
  for (uint8_t b : text) rng = (rng ^ b) * 0x100000001b3ull;
  for (int step = 0; step < 48 && !m.MustEnd(); ++step) {
    m.FillMask(mask);
    m.FillMaskUncached(uncached);
    Require(mask == uncached);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < n; ++id) {
      if (step < 4) {  // brute force on the first steps only: a copy per token
        GrammarMatcher copy = m;
        Require(copy.Accept(id).ok() == Has(mask, id));
      }
      if (Has(mask, id)) allowed.push_back(id);
    }
    Require(!allowed.empty());
    Require(!Has(mask, n - 1));  // the special token
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    Require(m.Accept(allowed[(rng >> 33) % allowed.size()]).ok());
  }
  return 0;
}
