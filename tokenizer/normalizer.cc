#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "common/status.h"
#include "common/strings.h"
#include "nlohmann/json.hpp"
#include "tokenizer/json_util.h"

namespace baton::tokenizer {
namespace {

std::string Utf8procMap(std::string_view text, int options) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  if (n < 0) return std::string(text);  // input is sanitized first, so this is not reached
  std::string result(reinterpret_cast<char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

bool IsSpaceAscii(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

absl::Status ParseStep(const nlohmann::json& j, Normalizer* out) {
  BATON_ASSIGN_OR_RETURN(std::string type, JsonString(j, "type", "normalizer"));
  NormalizerStep step;
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array()) {
      return absl::InvalidArgumentError("normalizer Sequence: 'normalizers' must be an array");
    }
    for (const auto& sub : j["normalizers"]) BATON_RETURN_IF_ERROR(ParseStep(sub, out));
    return absl::OkStatus();
  }
  if (type == "Prepend") {
    step.kind = NormalizerStep::Kind::kPrepend;
    BATON_ASSIGN_OR_RETURN(step.text, JsonString(j, "prepend", "normalizer Prepend"));
  } else if (type == "Replace") {
    step.kind = NormalizerStep::Kind::kReplace;
    BATON_ASSIGN_OR_RETURN(Pattern p, ParsePattern(j, "normalizer Replace"));
    step.text = p.literal;
    step.regex = p.regex;
    BATON_ASSIGN_OR_RETURN(step.content, JsonString(j, "content", "normalizer Replace"));
  } else if (type == "NFC") {
    step.kind = NormalizerStep::Kind::kNfc;
  } else if (type == "NFD") {
    step.kind = NormalizerStep::Kind::kNfd;
  } else if (type == "NFKC") {
    step.kind = NormalizerStep::Kind::kNfkc;
  } else if (type == "NFKD") {
    step.kind = NormalizerStep::Kind::kNfkd;
  } else if (type == "Lowercase") {
    step.kind = NormalizerStep::Kind::kLowercase;
  } else if (type == "Strip") {
    step.kind = NormalizerStep::Kind::kStrip;
    step.strip_left = j.value("strip_left", false);
    step.strip_right = j.value("strip_right", false);
  } else {
    return absl::UnimplementedError(
        baton::StrCat("tokenizer.json: unsupported normalizer type '", type,
                      "' (supported: Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD, Lowercase, "
                      "Strip)"));
  }
  out->Add(std::move(step));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Normalizer> Normalizer::FromJson(const nlohmann::json& j) {
  Normalizer n;
  if (j.is_null()) return n;
  if (!j.is_object())
    return absl::InvalidArgumentError("tokenizer.json: 'normalizer' must be an object");
  BATON_RETURN_IF_ERROR(ParseStep(j, &n));
  return n;
}

std::string Normalizer::Apply(std::string_view input) const {
  std::string text(input);
  for (const NormalizerStep& s : steps_) {
    switch (s.kind) {
      case NormalizerStep::Kind::kPrepend:
        // HF prepends only to non-empty text.
        if (!text.empty()) text.insert(0, s.text);
        break;
      case NormalizerStep::Kind::kReplace:
        text = s.regex ? s.regex->ReplaceAll(text, s.content)
                       : baton::ReplaceAll(text, s.text, s.content);
        break;
      case NormalizerStep::Kind::kNfc:
        text = Utf8procMap(text, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        break;
      case NormalizerStep::Kind::kNfd:
        text = Utf8procMap(text, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
        break;
      case NormalizerStep::Kind::kNfkc:
        text = Utf8procMap(text, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
        break;
      case NormalizerStep::Kind::kNfkd:
        text = Utf8procMap(text, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
        break;
      case NormalizerStep::Kind::kLowercase:
        text = Utf8procMap(text, UTF8PROC_STABLE | UTF8PROC_CASEFOLD);
        break;
      case NormalizerStep::Kind::kStrip: {
        size_t b = 0;
        size_t e = text.size();
        if (s.strip_left) {
          while (b < e && IsSpaceAscii(text[b])) ++b;
        }
        if (s.strip_right) {
          while (e > b && IsSpaceAscii(text[e - 1])) --e;
        }
        text = text.substr(b, e - b);
        break;
      }
    }
  }
  return text;
}

}  // namespace baton::tokenizer
