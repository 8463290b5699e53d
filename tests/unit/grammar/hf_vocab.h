// Reads a byte-level BPE vocabulary (Hugging Face tokenizer.json, GPT-2 byte alphabet, as
// Llama 3's) into the token bytes and special flags a grammar::TokenVocab takes. Shared by
// the grammar tests and bench/grammar_mask_bench.cc; no tokenizer library involved.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace baton::grammar::testing {

struct HfVocab {
  std::vector<std::string> bytes;
  std::vector<bool> special;
};

// GPT-2's bytes_to_unicode, inverted: code point -> byte (-1 where none).
inline std::vector<int> UnicodeToByte() {
  std::vector<int> out(512, -1);
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    out[printable ? b : 256 + extra++] = b;
  }
  return out;
}

// False when the file is absent or not a byte-level vocabulary.
inline bool LoadHfVocab(const std::string& path, HfVocab* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream text;
  text << in.rdbuf();
  auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.contains("model") || !j["model"].contains("vocab")) return false;
  const std::vector<int> to_byte = UnicodeToByte();
  size_t n = 0;
  for (const auto& [tok, id] : j["model"]["vocab"].items()) n = std::max(n, id.get<size_t>() + 1);
  if (j.contains("added_tokens")) {
    for (const auto& t : j["added_tokens"]) n = std::max(n, t["id"].get<size_t>() + 1);
  }
  out->bytes.assign(n, "");
  out->special.assign(n, false);
  for (const auto& [tok, id] : j["model"]["vocab"].items()) {
    std::string bytes;
    for (size_t i = 0; i < tok.size();) {  // UTF-8 decode, then map each code point back
      const unsigned char c = tok[i];
      int cp = c, len = 1;
      if (c >= 0xc0 && c < 0xe0) cp = c & 0x1f, len = 2;
      if (c >= 0xe0) cp = c & 0x0f, len = 3;
      for (int k = 1; k < len && i + k < tok.size(); ++k) cp = (cp << 6) | (tok[i + k] & 0x3f);
      i += len;
      if (cp < 0 || cp >= 512 || to_byte[cp] < 0) return false;
      bytes += static_cast<char>(to_byte[cp]);
    }
    out->bytes[id.get<size_t>()] = bytes;
  }
  if (j.contains("added_tokens")) {
    for (const auto& t : j["added_tokens"]) {
      const size_t id = t["id"].get<size_t>();
      out->bytes[id] = t["content"].get<std::string>();
      out->special[id] = true;
    }
  }
  return true;
}

}  // namespace baton::grammar::testing
