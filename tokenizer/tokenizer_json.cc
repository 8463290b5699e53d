#include "tokenizer/tokenizer_json.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_split.h"
#include "common/special_token_text.h"
#include "common/status.h"
#include "common/strings.h"
#include "nlohmann/json.hpp"
#include "tokenizer/json_util.h"

namespace baton::tokenizer {
namespace {

using nlohmann::json;

// Token ids above this are refused: no real vocabulary is near it, and it bounds the
// memory a corrupt file can make us allocate.
constexpr int64_t kMaxTokenId = 1 << 24;

absl::Status Error(std::string_view source, std::string_view what) {
  return absl::InvalidArgumentError(baton::StrCat(source, ": ", what));
}

bool ContainsByteLevel(const json& j) {
  if (!j.is_object()) return false;
  if (j.value("type", "") == "ByteLevel") return true;
  for (const char* key : {"pretokenizers", "decoders"}) {
    if (j.contains(key) && j[key].is_array()) {
      for (const auto& sub : j[key]) {
        if (ContainsByteLevel(sub)) return true;
      }
    }
  }
  return false;
}

absl::Status ParseDecoder(const json& j, DecoderSpec* d, std::string_view source) {
  if (j.is_null()) return absl::OkStatus();
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    if (!j.contains("decoders") || !j["decoders"].is_array()) {
      return Error(source, "decoder Sequence: 'decoders' must be an array");
    }
    for (const auto& sub : j["decoders"]) BATON_RETURN_IF_ERROR(ParseDecoder(sub, d, source));
  } else if (type == "ByteLevel") {
    d->byte_level = true;
  } else if (type == "ByteFallback") {
    d->byte_fallback = true;
  } else if (type == "Fuse") {
    // Decoding here always fuses.
  } else if (type == "Replace") {
    BATON_ASSIGN_OR_RETURN(Pattern p, ParsePattern(j, "decoder Replace"));
    if (p.regex) return Error(source, "decoder Replace with a Regex pattern is not supported");
    BATON_ASSIGN_OR_RETURN(std::string content, JsonString(j, "content", "decoder Replace"));
    d->replacements.emplace_back(p.literal, content);
  } else if (type == "Strip") {
    if (j.value("content", " ") != " " || j.value("stop", 0) != 0) {
      return Error(source, "decoder Strip is supported only for leading spaces");
    }
    d->strip_leading_spaces = j.value("start", 0);
  } else if (type == "Metaspace") {
    std::string replacement = j.value("replacement", std::string("\xE2\x96\x81"));
    d->replacements.emplace_back(replacement, " ");
    std::string scheme = j.value("prepend_scheme", std::string());
    if (scheme.empty()) scheme = j.value("add_prefix_space", true) ? "always" : "never";
    if (scheme != "never") d->strip_leading_spaces = 1;
  } else {
    return absl::UnimplementedError(baton::StrCat(
        source, ": unsupported decoder type '", type,
        "' (supported: Sequence, ByteLevel, ByteFallback, Fuse, Replace, Strip, Metaspace)"));
  }
  return absl::OkStatus();
}

// Reads BOS/EOS insertion from the post-processor.
absl::Status ParsePostProcessor(const json& j, Vocab* v, std::string_view source) {
  if (j.is_null()) return absl::OkStatus();
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    if (j.contains("processors") && j["processors"].is_array()) {
      for (const auto& sub : j["processors"])
        BATON_RETURN_IF_ERROR(ParsePostProcessor(sub, v, source));
    }
    return absl::OkStatus();
  }
  if (type == "ByteLevel") return absl::OkStatus();
  if (type != "TemplateProcessing") {
    return absl::UnimplementedError(baton::StrCat(source, ": unsupported post_processor type '",
                                                  type,
                                                  "' (supported: TemplateProcessing, "
                                                  "ByteLevel, Sequence)"));
  }
  if (!j.contains("single") || !j["single"].is_array()) {
    return Error(source, "post_processor TemplateProcessing: 'single' must be an array");
  }
  bool seen_sequence = false;
  for (const auto& item : j["single"]) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    if (!item.contains("SpecialToken") || !item["SpecialToken"].is_object()) continue;
    const std::string name = item["SpecialToken"].value("id", "");
    auto it = v->token_to_id.find(name);
    TokenId id = it == v->token_to_id.end() ? -1 : it->second;
    for (const AddedToken& t : v->added_tokens) {
      if (t.content == name) id = t.id;
    }
    if (id < 0) {
      return Error(source, baton::StrCat("post_processor names special token '", name,
                                         "', which is not in the vocabulary"));
    }
    if (seen_sequence) {
      v->add_eos = true;
      v->eos_id = id;
    } else {
      v->add_bos = true;
      v->bos_id = id;
    }
  }
  return absl::OkStatus();
}

absl::Status LoadVocabAndMerges(const json& model, Vocab* v, std::string_view source) {
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    return Error(source, "model.vocab must be an object of token -> id");
  }
  const json& vocab = model["vocab"];
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer()) {
      return Error(source, baton::StrCat("model.vocab['", it.key(), "'] is not an integer id"));
    }
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id > kMaxTokenId) {
      return Error(source, baton::StrCat("model.vocab['", it.key(), "'] = ", id, " is outside [0, ",
                                         kMaxTokenId, "]"));
    }
    max_id = std::max(max_id, id);
  }
  v->tokens.assign(static_cast<size_t>(max_id + 1), "");
  v->types.assign(v->tokens.size(), TokenType::kUnused);
  v->token_to_id.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const auto id = it.value().get<TokenId>();
    if (v->types[id] != TokenType::kUnused) {
      return Error(source, baton::StrCat("model.vocab gives id ", id, " to two tokens"));
    }
    v->tokens[id] = it.key();
    v->types[id] = TokenType::kNormal;
    v->token_to_id.emplace(it.key(), id);
  }
  if (!model.contains("merges")) return absl::OkStatus();
  const json& merges = model["merges"];
  if (!merges.is_array()) return Error(source, "model.merges must be an array");
  v->merges.reserve(merges.size());
  std::string left;
  std::string right;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& m = merges[rank];
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      const size_t space = s.find(' ', 1);
      if (space == std::string::npos) {
        return Error(source, baton::StrCat("model.merges[", rank, "] '", s, "' has no space"));
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      return Error(source,
                   baton::StrCat("model.merges[", rank, "] must be \"a b\" or [\"a\", \"b\"]"));
    }
    auto l = v->token_to_id.find(left);
    auto r = v->token_to_id.find(right);
    auto result = v->token_to_id.find(left + right);
    if (l == v->token_to_id.end() || r == v->token_to_id.end() || result == v->token_to_id.end()) {
      return Error(source, baton::StrCat("model.merges[", rank, "] ('", left, "', '", right,
                                         "') uses a token that is not in model.vocab"));
    }
    // The first occurrence of a pair wins, as in HF tokenizers.
    v->merges.try_emplace(Vocab::PairKey(l->second, r->second),
                          MergeInfo{static_cast<int32_t>(rank), result->second});
  }
  return absl::OkStatus();
}

absl::Status LoadAddedTokens(const json& added, Vocab* v, std::string_view source) {
  if (added.is_null()) return absl::OkStatus();
  if (!added.is_array()) return Error(source, "added_tokens must be an array");
  for (const json& a : added) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
        !a.contains("content") || !a["content"].is_string()) {
      return Error(source, "each added_tokens entry needs an integer 'id' and a string 'content'");
    }
    const int64_t id = a["id"].get<int64_t>();
    if (id < 0 || id > kMaxTokenId) {
      return Error(source,
                   baton::StrCat("added token id ", id, " is outside [0, ", kMaxTokenId, "]"));
    }
    AddedToken t;
    t.id = static_cast<TokenId>(id);
    t.content = a["content"].get<std::string>();
    if (t.content.empty()) return Error(source, baton::StrCat("added token ", id, " is empty"));
    t.special = a.value("special", false);
    t.lstrip = a.value("lstrip", false);
    t.rstrip = a.value("rstrip", false);
    t.single_word = a.value("single_word", false);
    if (static_cast<size_t>(id) >= v->tokens.size()) {
      v->tokens.resize(static_cast<size_t>(id) + 1);
      v->types.resize(static_cast<size_t>(id) + 1, TokenType::kUnused);
    }
    if (v->tokens[t.id].empty()) {
      v->tokens[t.id] = t.content;
      v->token_to_id.emplace(t.content, t.id);
    }
    v->types[t.id] = t.special ? TokenType::kControl : TokenType::kUserDefined;
    v->added_tokens.push_back(std::move(t));
  }
  return absl::OkStatus();
}

absl::StatusOr<Vocab> Build(const json& root, const json& config, std::string_view source) {
  if (!root.is_object()) return Error(source, "top level must be a JSON object");
  if (!root.contains("model") || !root["model"].is_object()) {
    return Error(source, "missing object 'model'");
  }
  const json& model = root["model"];
  const std::string type = model.value("type", "BPE");
  if (type != "BPE") {
    return absl::UnimplementedError(
        baton::StrCat(source, ": model type '", type,
                      "' is not supported (supported: BPE, byte-level or "
                      "SentencePiece-style)"));
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
      return absl::UnimplementedError(baton::StrCat(source, ": model.", key, " is not supported"));
    }
  }
  Vocab v;
  v.source = std::string(source);
  BATON_RETURN_IF_ERROR(LoadVocabAndMerges(model, &v, source));
  BATON_RETURN_IF_ERROR(LoadAddedTokens(root.value("added_tokens", json()), &v, source));
  const bool byte_level = ContainsByteLevel(root.value("pre_tokenizer", json())) ||
                          ContainsByteLevel(root.value("decoder", json()));
  v.kind = byte_level ? ModelKind::kByteLevelBpe : ModelKind::kSentencePieceBpe;
  v.byte_fallback = model.value("byte_fallback", false);
  v.ignore_merges = model.value("ignore_merges", false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto it = v.token_to_id.find(model["unk_token"].get<std::string>());
    if (it != v.token_to_id.end()) {
      v.unk_id = it->second;
      v.types[v.unk_id] = TokenType::kUnknown;
    }
  }
  BATON_ASSIGN_OR_RETURN(v.normalizer, Normalizer::FromJson(root.value("normalizer", json())));
  BATON_ASSIGN_OR_RETURN(v.pre_tokenizer,
                         PreTokenizer::FromJson(root.value("pre_tokenizer", json())));
  BATON_RETURN_IF_ERROR(ParseDecoder(root.value("decoder", json()), &v.decoder, source));
  BATON_RETURN_IF_ERROR(ParsePostProcessor(root.value("post_processor", json()), &v, source));

  // tokenizer_config.json names BOS/EOS and, for Llama-style tokenizers, overrides
  // whether they are added (transformers rebuilds the post-processor from it).
  for (auto [key, id] : {std::pair{"bos_token", &v.bos_id}, std::pair{"eos_token", &v.eos_id}}) {
    const std::string text = SpecialTokenText(config, key);
    if (text.empty()) continue;
    auto it = v.token_to_id.find(text);
    if (it == v.token_to_id.end()) {
      return Error(source, baton::StrCat("tokenizer_config.json ", key, " '", text,
                                         "' is not in the vocabulary"));
    }
    *id = it->second;
  }
  if (config.is_object()) {
    if (config.contains("add_bos_token") && config["add_bos_token"].is_boolean()) {
      v.add_bos = config["add_bos_token"].get<bool>();
    }
    if (config.contains("add_eos_token") && config["add_eos_token"].is_boolean()) {
      v.add_eos = config["add_eos_token"].get<bool>();
    }
  }
  return v;
}

}  // namespace

absl::StatusOr<Vocab> VocabFromTokenizerJson(std::string_view json_text, const json& config,
                                             std::string_view source) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return Error(source, "not valid JSON (expected a Hugging Face tokenizer.json)");
  }
  try {
    return Build(root, config, source);
  } catch (const json::exception& e) {
    // A field of an unexpected type deep inside; report it rather than crash.
    return Error(source, baton::StrCat("malformed field: ", e.what()));
  }
}

}  // namespace baton::tokenizer
