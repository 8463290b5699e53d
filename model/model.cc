#include "model/model.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/match.h"
#include "common/gguf_file.h"
#include "common/mapped_file.h"
#include "common/status.h"
#include "common/strings.h"
#include "model/gguf_loader.h"
#include "model/hf_loader.h"
#include "model/safetensors.h"
#include "model/weight_inventory.h"

namespace baton::model {
namespace {

namespace fs = std::filesystem;

// Small JSON files of a model directory; no real one is near these sizes.
constexpr size_t kMaxConfigBytes = size_t{16} << 20;
constexpr size_t kMaxIndexBytes = size_t{64} << 20;
// Progress is reported after each chunk of this many prefaulted bytes.
constexpr uint64_t kPrefaultChunk = uint64_t{64} << 20;

// The Model that Open returns: the parts, plus the mapped files its matrices point into.
class MappedModel : public Model {
 public:
  MappedModel(ModelParts parts, std::vector<MappedFile> files, std::string path, std::string format)
      : files_(std::move(files)) {
    config_ = std::move(parts.config);
    weights_ = std::move(parts.weights);
    generation_ = std::move(parts.generation);
    weight_bytes_ = parts.weight_bytes;
    inventory_ = InventoryOf(weights_, weight_bytes_);
    path_ = std::move(path);
    format_ = std::move(format);
  }

 private:
  std::vector<MappedFile> files_;
};

MappedFile::Backing BackingFor(const OpenOptions& options) {
  return options.use_mmap ? MappedFile::Backing::kFileMap : MappedFile::Backing::kAnonymousCopy;
}

absl::StatusOr<std::string> ReadOptional(const fs::path& path, size_t max_bytes) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::string();
  return ReadFileToString(path.string(), max_bytes);
}

// Reads each page of the matrices once, so the first forward pass does not stall on
// page faults, and reports progress every kPrefaultChunk bytes.
void Prefault(const Weights& w, const OpenOptions& options) {
  std::vector<std::pair<const char*, uint64_t>> ranges;
  auto add = [&](const cpu::MatrixRef& m) {
    if (m.data == nullptr) return;
    const auto* p = static_cast<const char*>(m.data);
    ranges.emplace_back(p, static_cast<uint64_t>(m.rows) * cpu::RowBytes(m.dtype, m.cols));
  };
  add(w.embedding);
  if (w.lm_head.data != w.embedding.data) add(w.lm_head);  // a tied head is the embedding
  for (const LayerWeights& l : w.layers) {
    for (const Linear* lin : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) add(lin->weight);
  }
  uint64_t total = 0;
  for (const auto& r : ranges) total += r.second;
  uint64_t done = 0, next_report = kPrefaultChunk;
  for (const auto& [p, n] : ranges) {
    for (uint64_t off = 0; off < n; off += kPrefaultChunk) {
      const uint64_t len = std::min(kPrefaultChunk, n - off);
      PopulatePages(p + off, len);
      done += len;
      if (options.progress && (done >= next_report || done == total)) {
        options.progress(done, total);
        while (next_report <= done) next_report += kPrefaultChunk;
      }
    }
  }
  if (options.progress && total == 0) options.progress(0, 0);
}

absl::StatusOr<std::unique_ptr<Model>> Finish(ModelParts parts, std::vector<MappedFile> files,
                                              std::string path, std::string format,
                                              const OpenOptions& options) {
  if (options.int8_activations) {
    auto mark = [](cpu::MatrixRef& m) { m.int8_activations = true; };
    for (LayerWeights& l : parts.weights.layers) {
      for (Linear* lin : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) mark(lin->weight);
    }
    mark(parts.weights.lm_head);
  }
  if (options.prefault) {
    Prefault(parts.weights, options);
    // A file partly cached in small folios gets one more pass, after the whole file is
    // dropped from the page cache, so that the decode kernels read 2 MiB pages
    // (MappedFile::RecacheSmallPages; docs/models.md).
    bool again = false;
    for (MappedFile& file : files) again = file.RecacheSmallPages() || again;
    if (again) Prefault(parts.weights, options);
  }
  return std::unique_ptr<Model>(
      new MappedModel(std::move(parts), std::move(files), std::move(path), std::move(format)));
}

absl::StatusOr<std::unique_ptr<Model>> OpenGguf(const std::string& path,
                                                const OpenOptions& options) {
  BATON_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path, BackingFor(options)));
  BATON_ASSIGN_OR_RETURN(ModelParts parts, LoadGgufModel(file.view(), path));
  if (parts.config.name.empty()) parts.config.name = fs::path(path).stem().string();
  std::vector<MappedFile> files;
  files.push_back(std::move(file));
  return Finish(std::move(parts), std::move(files), path, "gguf", options);
}

absl::StatusOr<std::unique_ptr<Model>> OpenHf(const std::string& dir_path,
                                              const OpenOptions& options) {
  const fs::path dir(dir_path);
  BATON_ASSIGN_OR_RETURN(std::string config,
                         ReadFileToString((dir / "config.json").string(), kMaxConfigBytes));
  BATON_ASSIGN_OR_RETURN(std::string generation,
                         ReadOptional(dir / "generation_config.json", kMaxConfigBytes));
  BATON_ASSIGN_OR_RETURN(std::string index,
                         ReadOptional(dir / "model.safetensors.index.json", kMaxIndexBytes));
  std::vector<std::string> names;
  if (index.empty()) {
    names.emplace_back("model.safetensors");
  } else {
    // Only to learn which shards to map; LoadHfModel parses and checks it again.
    BATON_ASSIGN_OR_RETURN(
        SafetensorsIndex parsed,
        ParseSafetensorsIndex(index, (dir / "model.safetensors.index.json").string()));
    names = parsed.shards;
  }
  std::vector<MappedFile> files;
  HfModelBytes in;
  in.config_json = config;
  in.generation_config_json = generation;
  in.index_json = index;
  in.source = dir_path;
  for (const std::string& name : names) {
    const fs::path file = dir / name;
    std::error_code ec;
    if (!fs::exists(file, ec)) {
      return absl::NotFoundError(
          baton::StrCat("'", file.string(), "' does not exist",
                        index.empty() ? " (and there is no model.safetensors.index.json)"
                                      : " (model.safetensors.index.json names it)"));
    }
    BATON_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::Open(file.string(), BackingFor(options)));
    files.push_back(std::move(mapped));
  }
  for (size_t i = 0; i < names.size(); ++i) in.files.emplace_back(names[i], files[i].view());
  BATON_ASSIGN_OR_RETURN(ModelParts parts, LoadHfModel(in));
  return Finish(std::move(parts), std::move(files), dir_path, "safetensors", options);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> Model::Open(const std::string& path,
                                                   const OpenOptions& options) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path dir(path);
    if (fs::exists(dir / "config.json", ec)) return OpenHf(path, options);
    const std::vector<std::string> ggufs = gguf::GgufFilesIn(dir.string());
    if (ggufs.size() == 1) return OpenGguf(ggufs[0], options);
    return absl::NotFoundError(baton::StrCat(
        "'", path, "' has no config.json and ", ggufs.size(),
        " .gguf files; point at a Hugging Face model directory or a single .gguf file"));
  }
  if (!fs::exists(path, ec)) {
    return absl::NotFoundError(baton::StrCat("model path '", path, "' does not exist"));
  }
  if (gguf::LooksLikeGgufFile(path)) return OpenGguf(path, options);
  return absl::InvalidArgumentError(baton::StrCat(
      "'", path, "' is neither a .gguf file nor a directory with config.json; point at one"));
}

}  // namespace baton::model
