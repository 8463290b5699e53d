// Exactness against the upstream JavaScript port of Hugging Face tokenizers
// (@huggingface/tokenizers, installed in tests/oracle/node_modules) on a large generated
// corpus (tests/oracle/make_corpus.mjs): for every string, Baton's Encode must give the
// oracle's ids and Decode the oracle's text, and streaming the ids one at a time through
// IncrementalDetokenizer must give exactly Decode(ids), in chunks of valid UTF-8 only.
//
// Skips visibly when node, the npm packages or a tokenizer file is absent. The corpus
// size and seed can be changed with BATON_ORACLE_COUNT and BATON_ORACLE_SEED;
// BATON_ORACLE_UNICODE_NEW=1 adds letters from Unicode 15.0-16.0 (make_corpus.mjs
// --unicode-new), which Debian 12's PCRE2 10.42 (Unicode 14.0) does not know.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/strings.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tokenizer/detokenizer.h"
#include "tokenizer/loader.h"
#include "tokenizer/tokenizer.h"

namespace baton::tokenizer {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxReported = 10;  // detailed mismatch reports per check and tokenizer

std::string SourcePath(const std::string& relative) {
  return std::string(BATON_SOURCE_DIR) + "/" + relative;
}
std::string TestDataFile(const std::string& relative) {
  return std::string(BATON_TESTDATA_DIR) + "/" + relative;
}
std::string OracleDir() { return SourcePath("tests/oracle"); }

std::string ShellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

struct CommandResult {
  int status = -1;
  std::string out;
};

CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 1 << 16> buf;
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) result.out.append(buf.data(), n);
  result.status = pclose(pipe);
  return result;
}

// A file in the temporary directory, removed when this goes out of scope.
class TempFile {
 public:
  TempFile() {
    static std::atomic<int> counter{0};
    path_ = (fs::temp_directory_path() /
             baton::StrCat("baton_encode_oracle_", getpid(), "_", counter++, ".json"))
                .string();
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The text as a JavaScript/JSON string literal body: printable ASCII as is, everything
// else escaped, so that control characters, marks and spaces are visible.
std::string Escape(std::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      switch (c) {
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        default:
          if (c < 0x20 || c == 0x7F) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\x%02X", c);
            out += buf;
          } else {
            out += static_cast<char>(c);
          }
      }
      continue;
    }
    const int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    char32_t cp = len == 4 ? c & 0x07 : len == 3 ? c & 0x0F : len == 2 ? c & 0x1F : c;
    bool ok = len > 1 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      ok = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3F);
    }
    char buf[16];
    if (!ok) {
      std::snprintf(buf, sizeof(buf), "<bad %02X>", c);
      out += buf;
      ++i;
      continue;
    }
    std::snprintf(buf, sizeof(buf), cp > 0xFFFF ? "\\u{%X}" : "\\u%04X", static_cast<unsigned>(cp));
    out += buf;
    i += len;
  }
  return out;
}

// Independent of the library's own UTF-8 code: well-formed UTF-8 per RFC 3629 (no
// overlongs, no surrogates, nothing above U+10FFFF, no truncated sequence).
bool IsValidUtf8Chunk(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if (c1 < lo || c1 > hi) return false;
    for (int k = 2; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

bool HaveNode() {
  const CommandResult r = RunCommand("node --version 2>/dev/null");
  return r.status == 0 && !r.out.empty() && r.out[0] == 'v';
}

bool HaveOraclePackages() {
  return fs::exists(OracleDir() + "/node_modules/@huggingface/tokenizers/package.json");
}

// The corpus, generated once per process.
const std::vector<std::string>& Corpus(std::string* error) {
  static std::string corpus_error;
  static const std::vector<std::string> corpus = [] {
    std::vector<std::string> texts;
    std::string command = baton::StrCat("node ", ShellQuote(OracleDir() + "/make_corpus.mjs"));
    if (const char* count = std::getenv("BATON_ORACLE_COUNT")) {
      command += baton::StrCat(" --count ", ShellQuote(count));
    }
    if (const char* seed = std::getenv("BATON_ORACLE_SEED")) {
      command += baton::StrCat(" --seed ", ShellQuote(seed));
    }
    if (const char* unicode_new = std::getenv("BATON_ORACLE_UNICODE_NEW");
        unicode_new != nullptr && std::string_view(unicode_new) == "1") {
      command += " --unicode-new";
    }
    const CommandResult r = RunCommand(command);
    if (r.status != 0) {
      corpus_error = baton::StrCat("`", command, "` failed with status ", r.status);
      return texts;
    }
    std::istringstream lines(r.out);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.empty()) continue;
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.contains("text") || !j["text"].is_string()) {
        corpus_error = baton::StrCat("make_corpus.mjs printed a bad line: ", line);
        texts.clear();
        return texts;
      }
      texts.push_back(j["text"].get<std::string>());
    }
    return texts;
  }();
  *error = corpus_error;
  return corpus;
}

struct OracleResult {
  std::vector<std::vector<TokenId>> ids;
  std::vector<std::string> decoded;
};

// Runs encode_oracle.mjs on all texts at once; on failure returns false with *error set.
bool RunOracle(const std::string& tokenizer_json, const std::string& config_json,
               const std::vector<std::string>& texts, OracleResult* result, std::string* error) {
  TempFile request_file;
  {
    nlohmann::json request = {{"tokenizer_json_path", tokenizer_json},
                              {"tokenizer_config_path", config_json},
                              {"texts", texts}};
    std::ofstream out(request_file.path(), std::ios::binary);
    out << request.dump();
    if (!out) {
      *error = "cannot write " + request_file.path();
      return false;
    }
  }
  const std::string command = baton::StrCat("node ", ShellQuote(OracleDir() + "/encode_oracle.mjs"),
                                            " < ", ShellQuote(request_file.path()));
  const CommandResult r = RunCommand(command);
  if (r.status != 0) {
    *error = baton::StrCat("`", command, "` failed with status ", r.status);
    return false;
  }
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("ids") || !j.contains("decoded") ||
      j["ids"].size() != texts.size() || j["decoded"].size() != texts.size()) {
    *error =
        baton::StrCat("encode_oracle.mjs answered ", r.out.size(),
                      " bytes that are not ids and decoded texts for ", texts.size(), " strings");
    return false;
  }
  result->ids = j["ids"].get<std::vector<std::vector<TokenId>>>();
  result->decoded = j["decoded"].get<std::vector<std::string>>();
  return true;
}

// Characters on which the oracle is known to differ from the Rust `tokenizers` library
// (which Baton follows) for one tokenizer: strings holding one are not compared.
struct BlindSpot {
  std::vector<std::string> chars;  // UTF-8
  std::string reason;

  bool Covers(std::string_view text) const {
    for (const std::string& s : chars) {
      if (text.find(s) != std::string_view::npos) return true;
    }
    return false;
  }
};

struct TokenizerCase {
  std::string name;
  std::string tokenizer_json;
  std::string config_json;
  BlindSpot encode_blind_spot = {};
  BlindSpot decode_blind_spot = {};
};

void PrintTo(const TokenizerCase& c, std::ostream* os) { *os << c.name; }

std::string PrintCase(const ::testing::TestParamInfo<TokenizerCase>& info) {
  return info.param.name;
}

std::vector<TokenizerCase> AllCases() {
  const std::string lenml = SourcePath("tests/oracle/node_modules/@lenml");
  std::vector<TokenizerCase> cases;
  cases.push_back({.name = "hf_llama3",
                   .tokenizer_json = TestDataFile("tokenizers/hf/llama3/tokenizer.json"),
                   .config_json = TestDataFile("tokenizers/hf/llama3/tokenizer_config.json")});
  // The oracle's ByteFallback decoder runs byte tokens through a TextDecoder that strips
  // a leading byte-order mark, so U+FEFF (byte-fallback <0xEF><0xBB><0xBF> here) vanishes
  // at the start of each run of byte tokens: ids of "a \uFEFFb" decode to "a b" there,
  // to "a \uFEFFb" in Rust and Baton.
  cases.push_back({.name = "stories260K",
                   .tokenizer_json = TestDataFile("models/stories260K/hf/tokenizer.json"),
                   .config_json = TestDataFile("models/stories260K/hf/tokenizer_config.json"),
                   .decode_blind_spot = {{"\xEF\xBB\xBF"},
                                         "U+FEFF: the oracle's ByteFallback decoder strips BOMs"}});
  for (const char* model : {"llama3", "qwen3", "gpt2"}) {
    const std::string dir = baton::StrCat(lenml, "/tokenizer-", model, "/models");
    cases.push_back({.name = baton::StrCat("lenml_", model),
                     .tokenizer_json = dir + "/tokenizer.json",
                     .config_json = dir + "/tokenizer_config.json"});
  }
  // GPT-2's pre-tokenizer is ByteLevel with use_regex, for which the oracle uses a
  // JavaScript regex literal whose \s has U+FEFF and lacks U+0085 (NEL); Oniguruma's
  // \s, which the Rust library and Baton follow, is the other way round. E.g. "a \uFEFFb":
  // Rust [64, 27332, 119, 123, 65], oracle [64, 220, 171, 119, 123, 65].
  cases.back().encode_blind_spot = {{"\xC2\x85", "\xEF\xBB\xBF"},
                                    "U+0085/U+FEFF: the oracle's ByteLevel regex uses JS \\s"};
  return cases;
}

// Long values are cut around the first difference, so that a report stays readable.
constexpr size_t kContext = 12;     // ids either side of the first differing id
constexpr size_t kTextWindow = 80;  // bytes of text either side of the first difference

std::string IdWindow(const std::vector<TokenId>& ids, size_t at) {
  const size_t b = at > kContext ? at - kContext : 0;
  const size_t e = std::min(ids.size(), at + kContext);
  std::string out = b > 0 ? baton::StrCat("[... (", b, " ids) ") : "[";
  for (size_t i = b; i < e; ++i) out += baton::StrCat(i > b ? ", " : "", ids[i]);
  out += e < ids.size() ? baton::StrCat(" ... (", ids.size() - e, " more)]") : "]";
  return out;
}

// The text shown whole if short, else the window around byte `at` (kept on UTF-8
// character boundaries).
std::string TextWindow(std::string_view text, size_t at) {
  if (text.size() <= 2 * kTextWindow) return "\"" + Escape(text) + "\"";
  auto boundary = [&](size_t i) {
    while (i > 0 && i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
    return i;
  };
  const size_t b = boundary(at > kTextWindow ? at - kTextWindow : 0);
  const size_t e = boundary(std::min(text.size(), at + kTextWindow));
  return baton::StrCat(b > 0 ? "..." : "", "\"", Escape(text.substr(b, e - b)), "\"",
                       e < text.size() ? "..." : "", " (", text.size(), " bytes)");
}

template <typename Seq>
size_t FirstDifference(const Seq& a, const Seq& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

class EncodeOracleTest : public ::testing::TestWithParam<TokenizerCase> {};

TEST_P(EncodeOracleTest, MatchesUpstreamJavaScript) {
  const TokenizerCase& c = GetParam();
  if (!HaveNode()) GTEST_SKIP() << "node is not installed; the oracle needs it";
  if (!HaveOraclePackages()) {
    GTEST_SKIP() << "npm packages absent in " << OracleDir()
                 << "/node_modules (run: cd tests/oracle && npm install --no-audit --no-fund "
                    "--no-package-lock)";
  }
  if (!fs::exists(c.tokenizer_json)) GTEST_SKIP() << "tokenizer absent: " << c.tokenizer_json;

  std::string error;
  const std::vector<std::string>& texts = Corpus(&error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_FALSE(texts.empty()) << "make_corpus.mjs produced no strings";

  auto files = LoadTokenizerFiles(c.tokenizer_json);
  ASSERT_TRUE(files.ok()) << files.status();
  const std::shared_ptr<const Tokenizer> tok = files->tokenizer;

  OracleResult oracle;
  ASSERT_TRUE(RunOracle(c.tokenizer_json, c.config_json, texts, &oracle, &error)) << error;

  int encode_compared = 0;
  int encode_fail = 0;
  int decode_compared = 0;
  int decode_fail = 0;
  int stream_fail = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& text = texts[i];
    const std::vector<TokenId>& want = oracle.ids[i];

    auto ids = tok->Encode(text, {.add_special_tokens = false, .parse_special = true});
    ASSERT_TRUE(ids.ok()) << ids.status() << " for " << TextWindow(text, 0);
    if (!c.encode_blind_spot.Covers(text)) {
      ++encode_compared;
      if (*ids != want && ++encode_fail <= kMaxReported) {
        const size_t at = FirstDifference(*ids, want);
        // Where in the text the ids part: about the length of what the common ids spell.
        auto prefix = tok->Decode(std::span(want).first(at), {.skip_special_tokens = false});
        const size_t text_at = prefix.ok() ? std::min(prefix->size(), text.size()) : 0;
        ADD_FAILURE() << c.name << " encode #" << i << " " << TextWindow(text, text_at)
                      << "\n  first difference at id " << at << " of " << ids->size() << " / "
                      << want.size() << "\n  baton:  " << IdWindow(*ids, at)
                      << "\n  oracle: " << IdWindow(want, at);
      }
    }

    // Decoding is checked on the oracle's ids, so that it is tested even where encoding
    // differs.
    auto decoded = tok->Decode(want, {.skip_special_tokens = true});
    ASSERT_TRUE(decoded.ok()) << decoded.status() << " for " << IdWindow(want, 0);
    if (!c.decode_blind_spot.Covers(text)) {
      ++decode_compared;
      if (*decoded != oracle.decoded[i] && ++decode_fail <= kMaxReported) {
        const size_t at = FirstDifference(*decoded, oracle.decoded[i]);
        ADD_FAILURE() << c.name << " decode #" << i << " (text " << TextWindow(text, 0)
                      << ")\n  first difference at byte " << at
                      << "\n  baton:  " << TextWindow(*decoded, at)
                      << "\n  oracle: " << TextWindow(oracle.decoded[i], at);
      }
    }

    for (const bool skip : {true, false}) {
      auto whole = tok->Decode(want, {.skip_special_tokens = skip});
      ASSERT_TRUE(whole.ok()) << whole.status();
      IncrementalDetokenizer detok(tok, {.skip_special_tokens = skip});
      std::string streamed;
      std::string bad_chunk;
      bool all_valid = true;
      for (TokenId id : want) {
        auto chunk = detok.Add(id);
        ASSERT_TRUE(chunk.ok()) << chunk.status();
        if (all_valid && !IsValidUtf8Chunk(*chunk)) {
          all_valid = false;
          bad_chunk = *chunk;
        }
        streamed += *chunk;
      }
      const std::string tail = detok.Finish();
      if (all_valid && !IsValidUtf8Chunk(tail)) {
        all_valid = false;
        bad_chunk = tail;
      }
      streamed += tail;
      if ((streamed != *whole || !all_valid) && ++stream_fail <= kMaxReported) {
        const size_t at = FirstDifference(streamed, *whole);
        ADD_FAILURE() << c.name << " streaming #" << i << " (skip_special_tokens=" << skip
                      << ") of " << IdWindow(want, 0)
                      << "\n  streamed: " << TextWindow(streamed, at)
                      << "\n  Decode:   " << TextWindow(*whole, at)
                      << (all_valid ? "" : "\n  invalid UTF-8 chunk: " + TextWindow(bad_chunk, 0));
      }
    }
  }
  const int n = static_cast<int>(texts.size());
  std::cout << "[ oracle   ] " << c.name << ": encode " << encode_compared - encode_fail << "/"
            << encode_compared << ", decode " << decode_compared - decode_fail << "/"
            << decode_compared << ", streaming " << 2 * n - stream_fail << "/" << 2 * n
            << " match\n";
  for (const BlindSpot* spot : {&c.encode_blind_spot, &c.decode_blind_spot}) {
    const int skipped = (spot == &c.encode_blind_spot ? n - encode_compared : n - decode_compared);
    if (skipped > 0) {
      std::cout << "[ oracle   ]   " << skipped << " strings not compared ("
                << (spot == &c.encode_blind_spot ? "encode" : "decode") << "): " << spot->reason
                << "\n";
    }
  }
  RecordProperty("encode_matches", encode_compared - encode_fail);
  RecordProperty("encode_compared", encode_compared);
  EXPECT_EQ(encode_fail, 0) << encode_fail << " of " << encode_compared
                            << " strings encode differently";
  EXPECT_EQ(decode_fail, 0) << decode_fail << " of " << decode_compared
                            << " id lists decode differently";
  EXPECT_EQ(stream_fail, 0) << stream_fail << " of " << 2 * n << " streams differ from Decode";
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, EncodeOracleTest, ::testing::ValuesIn(AllCases()), PrintCase);

}  // namespace
}  // namespace baton::tokenizer
