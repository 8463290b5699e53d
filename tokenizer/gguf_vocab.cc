#include "tokenizer/gguf_vocab.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/strings.h"
#include "common/utf8.h"

namespace baton::tokenizer {
namespace {

constexpr char kLlama3Regex[] =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr char kQwen2Regex[] =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr char kGpt2Regex[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The DeepSeek LLM letter class, as its tokenizer.json spells it.
constexpr char kDeepseekLetters[] =
    "\\s?["
    "A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}"
    "\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}"
    "\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}"
    "\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}"
    "\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"
    "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
    "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}"
    "\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}"
    "\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}"
    "\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}"
    "\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}"
    "\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}"
    "\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}"
    "\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}"
    "\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}"
    "\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}"
    "\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}"
    "\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}"
    "\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}"
    "\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}"
    "\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}"
    "\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"
    "\\x{1E900}-\\x{1E943}"
    "]+";

absl::Status Error(std::string_view source, std::string_view what) {
  return absl::InvalidArgumentError(baton::StrCat(source, ": ", what));
}

// Optional integer key: -1 when absent.
absl::StatusOr<int64_t> OptionalId(const gguf::File& f, std::string_view key) {
  if (!f.Has(key)) return -1;
  return f.GetInt(key);
}

// Every real vocabulary is valid UTF-8: byte-level BPE spells each byte as a printable
// code point, and SentencePiece writes raw bytes as ASCII "<0x0A>" tokens. So invalid
// UTF-8 in a token means a corrupted file, which would otherwise load and emit garbage.
absl::Status CheckTokenUtf8(std::string_view token, size_t index, std::string_view source) {
  size_t pos = 0;
  char32_t cp = 0;
  while (pos < token.size()) {
    const size_t at = pos;
    if (!DecodeUtf8(token, &pos, &cp)) {
      return Error(source, baton::StrCat("tokenizer.ggml.tokens[", index,
                                         "] is not valid UTF-8 (bad sequence at byte ", at, ")"));
    }
  }
  return absl::OkStatus();
}

// SentencePiece GGUFs carry scores, not merges. A pair of tokens may merge when their
// concatenation is a normal token; higher scores merge first, equal scores leftmost.
void BuildMergesFromScores(const std::vector<float>& scores, Vocab* v) {
  std::vector<float> distinct;
  for (size_t i = 0; i < v->tokens.size(); ++i) {
    if (v->types[i] == TokenType::kNormal || v->types[i] == TokenType::kUndefined) {
      distinct.push_back(scores[i]);
    }
  }
  std::sort(distinct.begin(), distinct.end(), std::greater<>());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  auto rank_of = [&](float score) {
    return static_cast<int32_t>(
        std::lower_bound(distinct.begin(), distinct.end(), score, std::greater<>()) -
        distinct.begin());
  };
  for (size_t i = 0; i < v->tokens.size(); ++i) {
    if (v->types[i] != TokenType::kNormal && v->types[i] != TokenType::kUndefined) continue;
    const std::string& text = v->tokens[i];
    size_t pos = 0;
    char32_t cp = 0;
    DecodeUtf8(text, &pos, &cp);
    while (pos < text.size()) {
      auto l = v->token_to_id.find(std::string_view(text).substr(0, pos));
      auto r = v->token_to_id.find(std::string_view(text).substr(pos));
      if (l != v->token_to_id.end() && r != v->token_to_id.end()) {
        v->merges.try_emplace(Vocab::PairKey(l->second, r->second),
                              MergeInfo{rank_of(scores[i]), static_cast<TokenId>(i)});
      }
      DecodeUtf8(text, &pos, &cp);
    }
  }
}

absl::Status LoadMerges(const gguf::File& f, Vocab* v, std::string_view source) {
  BATON_ASSIGN_OR_RETURN(std::vector<std::string_view> merges,
                         f.GetStringArray("tokenizer.ggml.merges"));
  v->merges.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string_view m = merges[rank];
    const size_t space = m.find(' ', 1);
    if (space == std::string_view::npos) {
      return Error(source, baton::StrCat("tokenizer.ggml.merges[", rank, "] has no space"));
    }
    auto l = v->token_to_id.find(m.substr(0, space));
    auto r = v->token_to_id.find(m.substr(space + 1));
    auto result = v->token_to_id.find(baton::StrCat(m.substr(0, space), m.substr(space + 1)));
    if (l == v->token_to_id.end() || r == v->token_to_id.end() || result == v->token_to_id.end()) {
      return Error(source, baton::StrCat("tokenizer.ggml.merges[", rank, "] '", m,
                                         "' uses a token that is not in tokenizer.ggml.tokens"));
    }
    v->merges.try_emplace(Vocab::PairKey(l->second, r->second),
                          MergeInfo{static_cast<int32_t>(rank), result->second});
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> PreTokenizerRegexes(std::string_view pre) {
  if (pre == "llama-bpe" || pre == "llama3" || pre == "dbrx" || pre == "smaug-bpe") {
    return std::vector<std::string>{kLlama3Regex};
  }
  if (pre == "qwen2") return std::vector<std::string>{kQwen2Regex};
  if (pre == "gpt-2" || pre == "mpt" || pre == "olmo" || pre == "jais" || pre == "phi-2" ||
      pre == "gpt-neox" || pre == "default") {
    return std::vector<std::string>{kGpt2Regex};
  }
  if (pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "smollm" ||
      pre == "codeshell" || pre == "exaone") {
    return std::vector<std::string>{R"(\p{N})", kGpt2Regex};
  }
  if (pre == "deepseek-llm") {
    return std::vector<std::string>{
        "[\r\n]",
        kDeepseekLetters,
        "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
        "\\s+$",
        "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
        "\\p{N}+"};
  }
  if (pre == "deepseek-coder") {
    return std::vector<std::string>{"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
                                    "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
                                    "\\p{N}"};
  }
  if (pre == "falcon") {
    return std::vector<std::string>{
        "[\\p{P}\\$\\+<=>\\^~\\|`]+",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
        "[0-9][0-9][0-9]"};
  }
  return absl::NotFoundError(baton::StrCat(
      "unsupported tokenizer.ggml.pre '", pre,
      "' (supported: llama-bpe, llama3, dbrx, smaug-bpe, qwen2, gpt-2, gpt-neox, mpt, olmo, jais, "
      "phi-2, starcoder, refact, command-r, smollm, codeshell, exaone, deepseek-llm, "
      "deepseek-coder, falcon)"));
}

absl::StatusOr<Vocab> VocabFromGguf(const gguf::File& f, std::string_view source) {
  Vocab v;
  v.source = std::string(source);
  if (!f.Has("tokenizer.ggml.model")) {
    return Error(source, "no tokenizer.ggml.model key: this GGUF carries no vocabulary");
  }
  BATON_ASSIGN_OR_RETURN(std::string_view model, f.GetString("tokenizer.ggml.model"));
  if (model == "gpt2") {
    v.kind = ModelKind::kByteLevelBpe;
  } else if (model == "llama") {
    v.kind = ModelKind::kSentencePieceBpe;
  } else {
    return absl::UnimplementedError(baton::StrCat(source, ": tokenizer.ggml.model '", model,
                                                  "' is not supported (supported: gpt2, llama)"));
  }
  BATON_ASSIGN_OR_RETURN(std::vector<std::string_view> tokens,
                         f.GetStringArray("tokenizer.ggml.tokens"));
  const size_t n = tokens.size();
  if (n == 0) return Error(source, "tokenizer.ggml.tokens is empty");
  v.tokens.reserve(n);
  v.token_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    BATON_RETURN_IF_ERROR(CheckTokenUtf8(tokens[i], i, source));
    v.tokens.emplace_back(tokens[i]);
    v.token_to_id.try_emplace(v.tokens.back(), static_cast<TokenId>(i));
  }
  v.types.assign(n, TokenType::kNormal);
  if (f.Has("tokenizer.ggml.token_type")) {
    BATON_ASSIGN_OR_RETURN(std::vector<int64_t> types, f.GetIntArray("tokenizer.ggml.token_type"));
    if (types.size() != n) {
      return Error(source, baton::StrCat("tokenizer.ggml.token_type has ", types.size(),
                                         " entries for ", n, " tokens"));
    }
    for (size_t i = 0; i < n; ++i) {
      if (types[i] < 0 || types[i] > 6) {
        return Error(source, baton::StrCat("tokenizer.ggml.token_type[", i, "] = ", types[i],
                                           " is not a token type (0-6)"));
      }
      v.types[i] = static_cast<TokenType>(types[i]);
    }
  }
  BATON_ASSIGN_OR_RETURN(int64_t bos, OptionalId(f, "tokenizer.ggml.bos_token_id"));
  BATON_ASSIGN_OR_RETURN(int64_t eos, OptionalId(f, "tokenizer.ggml.eos_token_id"));
  BATON_ASSIGN_OR_RETURN(int64_t unk, OptionalId(f, "tokenizer.ggml.unknown_token_id"));
  for (auto [name, value] :
       {std::pair{"bos", bos}, std::pair{"eos", eos}, std::pair{"unknown", unk}}) {
    if (value < -1 || value >= static_cast<int64_t>(n)) {
      return Error(source, baton::StrCat("tokenizer.ggml.", name, "_token_id = ", value,
                                         " is outside the vocabulary of ", n));
    }
  }
  v.bos_id = static_cast<TokenId>(bos);
  v.eos_id = static_cast<TokenId>(eos);
  v.unk_id = static_cast<TokenId>(unk);

  bool add_space_prefix = v.kind == ModelKind::kSentencePieceBpe;
  v.add_bos = v.kind == ModelKind::kSentencePieceBpe;
  if (f.Has("tokenizer.ggml.add_bos_token")) {
    BATON_ASSIGN_OR_RETURN(v.add_bos, f.GetBool("tokenizer.ggml.add_bos_token"));
  }
  if (f.Has("tokenizer.ggml.add_eos_token")) {
    BATON_ASSIGN_OR_RETURN(v.add_eos, f.GetBool("tokenizer.ggml.add_eos_token"));
  }
  if (f.Has("tokenizer.ggml.add_space_prefix")) {
    BATON_ASSIGN_OR_RETURN(add_space_prefix, f.GetBool("tokenizer.ggml.add_space_prefix"));
  }
  if (v.add_bos && v.bos_id < 0) v.add_bos = false;
  if (v.add_eos && v.eos_id < 0) v.add_eos = false;

  // Control and user-defined tokens are matched whole in the raw text, as llama.cpp does.
  for (size_t i = 0; i < n; ++i) {
    if ((v.types[i] == TokenType::kControl || v.types[i] == TokenType::kUserDefined) &&
        !v.tokens[i].empty()) {
      AddedToken t;
      t.id = static_cast<TokenId>(i);
      t.content = v.tokens[i];
      t.special = v.types[i] == TokenType::kControl;
      v.added_tokens.push_back(std::move(t));
    }
  }

  if (v.kind == ModelKind::kByteLevelBpe) {
    BATON_RETURN_IF_ERROR(LoadMerges(f, &v, source));
    std::string pre = "default";
    if (f.Has("tokenizer.ggml.pre")) {
      BATON_ASSIGN_OR_RETURN(std::string_view p, f.GetString("tokenizer.ggml.pre"));
      pre = std::string(p);
    }
    auto regexes = PreTokenizerRegexes(pre);
    if (!regexes.ok()) return Error(source, std::string(regexes.status().message()));
    BATON_ASSIGN_OR_RETURN(v.pre_tokenizer, PreTokenizer::FromRegexSequence(*regexes));
    v.ignore_merges = pre == "llama-bpe" || pre == "llama3";
    v.decoder.byte_level = true;
  } else {
    BATON_ASSIGN_OR_RETURN(std::vector<float> scores, f.GetFloatArray("tokenizer.ggml.scores"));
    if (scores.size() != n) {
      return Error(source, baton::StrCat("tokenizer.ggml.scores has ", scores.size(),
                                         " entries for ", n, " tokens"));
    }
    BuildMergesFromScores(scores, &v);
    v.byte_fallback = true;
    const std::string space = "\xE2\x96\x81";
    if (add_space_prefix) {
      NormalizerStep prepend;
      prepend.kind = NormalizerStep::Kind::kPrepend;
      prepend.text = space;
      v.normalizer.Add(std::move(prepend));
    }
    NormalizerStep replace;
    replace.kind = NormalizerStep::Kind::kReplace;
    replace.text = " ";
    replace.content = space;
    v.normalizer.Add(std::move(replace));
    v.decoder.byte_fallback = true;
    v.decoder.replacements.emplace_back(space, " ");
    v.decoder.strip_leading_spaces = add_space_prefix ? 1 : 0;
  }
  return v;
}

}  // namespace baton::tokenizer
