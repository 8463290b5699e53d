// Parses arbitrary bytes as a GGUF and builds its vocabulary; what loads must encode and
// decode without crashing.
#include <cstdint>
#include <string_view>

#include "common/gguf_file.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace baton::tokenizer;  // NOLINT(google-build-using-namespace)
  baton::gguf::Limits limits;
  limits.max_array_len = 1 << 16;
  auto file =
      baton::gguf::File::Parse(std::string_view(reinterpret_cast<const char*>(data), size), limits);
  if (!file.ok()) return 0;
  auto vocab = VocabFromGguf(*file, "fuzz.gguf");
  if (!vocab.ok()) return 0;
  auto tok = Tokenizer::Create(std::move(*vocab));
  if (!tok.ok()) return 0;
  auto ids = (*tok)->Encode("Hello world <s> caf\xC3\xA9 \xF0\x9F\xA6\x99 123\n\t x");
  if (ids.ok()) (void)(*tok)->Decode(*ids);
  return 0;
}
