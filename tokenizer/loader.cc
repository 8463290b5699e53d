#include "tokenizer/loader.h"

#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/match.h"
#include "common/gguf_file.h"
#include "common/mapped_file.h"
#include "common/status.h"
#include "common/strings.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer_json.h"

namespace baton::tokenizer {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<TokenizerFiles> LoadGguf(const std::string& path, const LoadOptions& options) {
  BATON_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  BATON_ASSIGN_OR_RETURN(gguf::File gguf, gguf::File::Parse(file.view()));
  BATON_ASSIGN_OR_RETURN(Vocab vocab, VocabFromGguf(gguf, path));
  TokenizerFiles out;
  if (gguf.Has("tokenizer.chat_template")) {
    BATON_ASSIGN_OR_RETURN(std::string_view tmpl, gguf.GetString("tokenizer.chat_template"));
    out.config["chat_template"] = std::string(tmpl);
  }
  if (vocab.bos_id >= 0) out.config["bos_token"] = vocab.tokens[vocab.bos_id];
  if (vocab.eos_id >= 0) out.config["eos_token"] = vocab.tokens[vocab.eos_id];
  out.config["add_bos_token"] = vocab.add_bos;
  out.config["add_eos_token"] = vocab.add_eos;
  BATON_ASSIGN_OR_RETURN(out.tokenizer, Tokenizer::Create(std::move(vocab), options.limits));
  return out;
}

absl::StatusOr<TokenizerFiles> LoadJson(const std::string& path, const std::string& config_path,
                                        const LoadOptions& options) {
  TokenizerFiles out;
  if (!config_path.empty() && fs::exists(config_path)) {
    BATON_ASSIGN_OR_RETURN(std::string text, ReadFileToString(config_path, options.max_json_bytes));
    out.config = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (out.config.is_discarded() || !out.config.is_object()) {
      return absl::InvalidArgumentError(
          baton::StrCat(config_path, ": not a JSON object (expected tokenizer_config.json)"));
    }
  }
  BATON_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, options.max_json_bytes));
  BATON_ASSIGN_OR_RETURN(Vocab vocab, VocabFromTokenizerJson(text, out.config, path));
  BATON_ASSIGN_OR_RETURN(out.tokenizer, Tokenizer::Create(std::move(vocab), options.limits));
  return out;
}

}  // namespace

absl::StatusOr<TokenizerFiles> LoadTokenizerFiles(const std::string& path,
                                                  const LoadOptions& options) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path dir(path);
    if (fs::exists(dir / "tokenizer.json")) {
      return LoadJson((dir / "tokenizer.json").string(), (dir / "tokenizer_config.json").string(),
                      options);
    }
    const std::vector<std::string> ggufs = gguf::GgufFilesIn(dir.string());
    if (ggufs.size() == 1) return LoadGguf(ggufs[0], options);
    return absl::NotFoundError(baton::StrCat(
        "'", path, "' has no tokenizer.json and ", ggufs.size(),
        " .gguf files; point --tokenizer at a tokenizer.json or a single .gguf file"));
  }
  if (!fs::exists(path, ec)) {
    return absl::NotFoundError(baton::StrCat("tokenizer path '", path, "' does not exist"));
  }
  if (gguf::LooksLikeGgufFile(path)) return LoadGguf(path, options);
  const fs::path config = fs::path(path).parent_path() / "tokenizer_config.json";
  return LoadJson(path, config.string(), options);
}

}  // namespace baton::tokenizer
