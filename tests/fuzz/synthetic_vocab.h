// Small vocabularies built in code, for fuzzers and unit tests that must not depend on
// files: a byte-level BPE (GPT-2 style) and a SentencePiece-style BPE with byte fallback.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace baton::tokenizer::synthetic {

inline TokenId AddToken(Vocab* v, const std::string& text, TokenType type = TokenType::kNormal) {
  auto it = v->token_to_id.find(text);
  if (it != v->token_to_id.end()) return it->second;
  const auto id = static_cast<TokenId>(v->tokens.size());
  v->tokens.push_back(text);
  v->types.push_back(type);
  v->token_to_id.emplace(text, id);
  return id;
}

// Merges are given in raw bytes; tokens are written in the byte-level alphabet.
inline void AddMerges(Vocab* v, const std::vector<std::pair<std::string, std::string>>& merges,
                      bool byte_level) {
  auto enc = [&](const std::string& s) { return byte_level ? BytesToUnicode(s) : s; };
  for (const auto& [a, b] : merges) {
    const TokenId l = AddToken(v, enc(a));
    const TokenId r = AddToken(v, enc(b));
    const TokenId m = AddToken(v, enc(a + b));
    v->merges.try_emplace(Vocab::PairKey(l, r),
                          MergeInfo{static_cast<int32_t>(v->merges.size()), m});
  }
}

inline const std::vector<std::pair<std::string, std::string>>& EnglishMerges() {
  static const std::vector<std::pair<std::string, std::string>> merges = {
      {" ", "t"},       {"h", "e"},   {" t", "he"}, {"i", "n"}, {"e", "r"},
      {" ", "a"},       {"o", "n"},   {" ", "w"},   {"r", "e"}, {"a", "t"},
      {"e", "n"},       {"in", "g"},  {" ", "s"},   {"o", "r"}, {"\xE2\x96", "\x81"},
      {"\xC3", "\xA9"}, {"l", "l"},   {" w", "or"}, {"l", "d"}, {" wor", "ld"},
      {"H", "e"},       {"He", "ll"}, {"Hell", "o"}};
  return merges;
}

inline void AddSpecials(Vocab* v) {
  for (const char* s : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    AddedToken t;
    t.id = AddToken(v, s, TokenType::kControl);
    t.content = s;
    t.special = true;
    v->added_tokens.push_back(t);
  }
  AddedToken user;
  user.id = AddToken(v, "<tool>", TokenType::kUserDefined);
  user.content = "<tool>";
  user.lstrip = true;
  user.rstrip = true;
  v->added_tokens.push_back(user);
  v->bos_id = v->token_to_id.at("<|im_start|>");
  v->eos_id = v->token_to_id.at("<|endoftext|>");
}

inline std::shared_ptr<const Tokenizer> ByteLevel() {
  Vocab v;
  v.source = "synthetic byte-level";
  v.kind = ModelKind::kByteLevelBpe;
  for (int b = 0; b < 256; ++b) AddToken(&v, ByteToUnicode(static_cast<uint8_t>(b)));
  AddMerges(&v, EnglishMerges(), /*byte_level=*/true);
  AddSpecials(&v);
  v.pre_tokenizer = PreTokenizer::FromRegexSequence({kGpt2SplitRegex}).value();
  v.decoder.byte_level = true;
  return Tokenizer::Create(std::move(v)).value();
}

inline std::shared_ptr<const Tokenizer> SentencePiece() {
  Vocab v;
  v.source = "synthetic sentencepiece";
  v.kind = ModelKind::kSentencePieceBpe;
  v.unk_id = AddToken(&v, "<unk>", TokenType::kUnknown);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    AddToken(&v, name, TokenType::kByte);
  }
  const std::string space = "\xE2\x96\x81";
  for (const char* c :
       {"a", "b", "c", "d", "e", "g", "h", "i", "l", "n", "o", "r", "s", "t", "w", "H", " "}) {
    AddToken(&v, c);
  }
  AddToken(&v, space);
  AddMerges(&v,
            {{space, "t"},
             {"h", "e"},
             {space + "t", "he"},
             {"i", "n"},
             {space, "w"},
             {"o", "r"},
             {"l", "d"},
             {space + "w", "or"},
             {space + "wor", "ld"},
             {"H", "e"},
             {"l", "l"},
             {"He", "ll"},
             {"Hell", "o"}},
            /*byte_level=*/false);
  AddSpecials(&v);
  v.byte_fallback = true;
  v.add_bos = true;
  NormalizerStep prepend;
  prepend.kind = NormalizerStep::Kind::kPrepend;
  prepend.text = space;
  v.normalizer.Add(prepend);
  NormalizerStep replace;
  replace.kind = NormalizerStep::Kind::kReplace;
  replace.text = " ";
  replace.content = space;
  v.normalizer.Add(replace);
  v.decoder.byte_fallback = true;
  v.decoder.replacements.emplace_back(space, " ");
  v.decoder.strip_leading_spaces = 1;
  return Tokenizer::Create(std::move(v)).value();
}

}  // namespace baton::tokenizer::synthetic
