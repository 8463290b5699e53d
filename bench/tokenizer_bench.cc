// Encode throughput of Baton's tokenizer, single-threaded, on a corpus file.
//
//   tokenizer_bench --tokenizer ../shared/testdata/tokenizers/hf/llama3/tokenizer.json
//                   --corpus build/release/tokenizer_corpus.txt --repeat 5 [--json]
//
// Two measurements:
//  - throughput: the corpus is cut into chunks of whole lines, each at least
//    --chunk-bytes (4096) bytes (the last may be shorter), and every chunk is encoded as
//    one call, as a server encodes one request's text. One pass over all chunks is timed;
//    --repeat passes give best and median MB/s (MB = 10^6 bytes of UTF-8 input).
//  - prompt latency: the longest prefix of the corpus ending at a line end that encodes
//    to at most --prompt-tokens (32768) tokens is encoded as one string --prompt-runs
//    times; median, p90 and best are reported.
// The first (untimed) pass also counts the tokens and hashes the ids (FNV-1a, 32-bit,
// over each id's 4 little-endian bytes, all chunks in order), which bench/tiktoken_bench.mjs
// computes the same way, so the two can be checked to produce the same ids.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "CLI/CLI.hpp"
#include "nlohmann/json.hpp"
#include "tokenizer/loader.h"
#include "tokenizer/tokenizer.h"

namespace {

using baton::tokenizer::EncodeOptions;
using baton::tokenizer::TokenId;
using baton::tokenizer::Tokenizer;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// CPU time of this thread: on a shared machine it leaves out the time other processes
// held the core (but not their effect on caches).
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The value at quantile q (0..1) of `v`, nearest-rank.
double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(q * static_cast<double>(v.size()) + 0.999999);
  rank = std::clamp<size_t>(rank, 1, v.size());
  return v[rank - 1];
}

// Whole lines, each chunk at least `min_bytes` long (except the last).
std::vector<std::string_view> Chunks(std::string_view text, size_t min_bytes) {
  std::vector<std::string_view> chunks;
  size_t start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (pos - start >= min_bytes || pos == text.size()) {
      chunks.push_back(text.substr(start, pos - start));
      start = pos;
    }
  }
  return chunks;
}

struct Hash {
  uint32_t h = 2166136261u;
  void Add(TokenId id) {
    const auto u = static_cast<uint32_t>(id);
    for (int shift = 0; shift < 32; shift += 8) {
      h ^= (u >> shift) & 0xFFu;
      h *= 16777619u;
    }
  }
};

struct Options {
  std::string tokenizer;
  std::string corpus;
  int repeat = 5;
  bool json = false;
  size_t chunk_bytes = 4096;
  size_t prompt_tokens = 32768;
  int prompt_runs = 50;
  bool parse_special = true;
};

int Run(const Options& opt) {
  std::ifstream in(opt.corpus, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "tokenizer_bench: cannot read %s\n", opt.corpus.c_str());
    return 1;
  }
  const std::string corpus((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (corpus.empty()) {
    std::fprintf(stderr, "tokenizer_bench: %s is empty\n", opt.corpus.c_str());
    return 1;
  }

  const Clock::time_point load_start = Clock::now();
  auto files = baton::tokenizer::LoadTokenizerFiles(opt.tokenizer);
  if (!files.ok()) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", std::string(files.status().message()).c_str());
    return 1;
  }
  const double load_s = SecondsSince(load_start);
  const Tokenizer& tok = *files->tokenizer;
  const EncodeOptions encode_options{.add_special_tokens = false,
                                     .parse_special = opt.parse_special};

  const std::vector<std::string_view> chunks = Chunks(corpus, opt.chunk_bytes);

  // Untimed pass: token count and id hash; also warms caches and thread_local buffers.
  size_t tokens = 0;
  Hash hash;
  for (std::string_view chunk : chunks) {
    auto ids = tok.Encode(chunk, encode_options);
    if (!ids.ok()) {
      std::fprintf(stderr, "tokenizer_bench: encode failed: %s\n",
                   std::string(ids.status().message()).c_str());
      return 1;
    }
    tokens += ids->size();
    for (TokenId id : *ids) hash.Add(id);
  }

  std::vector<double> pass_s;
  std::vector<double> pass_cpu_s;
  for (int r = 0; r < opt.repeat; ++r) {
    size_t check = 0;
    const double cpu_start = ThreadCpuSeconds();
    const Clock::time_point start = Clock::now();
    for (std::string_view chunk : chunks) check += tok.Encode(chunk, encode_options)->size();
    pass_s.push_back(SecondsSince(start));
    pass_cpu_s.push_back(ThreadCpuSeconds() - cpu_start);
    if (check != tokens) {
      std::fprintf(stderr, "tokenizer_bench: pass %d gave %zu tokens, not %zu\n", r, check, tokens);
      return 1;
    }
  }
  const double mb = static_cast<double>(corpus.size()) / 1e6;
  const double best_s = Quantile(pass_s, 0.0);
  const double median_s = Quantile(pass_s, 0.5);

  // The prompt: the longest line-ending prefix with at most prompt_tokens tokens.
  std::vector<size_t> line_ends;
  for (size_t p = corpus.find('\n'); p != std::string::npos; p = corpus.find('\n', p + 1)) {
    line_ends.push_back(p + 1);
  }
  auto count = [&](size_t bytes) {
    return tok.Encode(std::string_view(corpus).substr(0, bytes), encode_options)->size();
  };
  size_t lo = 0;  // line_ends[lo - 1] fits (lo == 0: nothing yet)
  size_t hi = line_ends.size();
  while (lo < hi) {
    const size_t mid = (lo + hi + 1) / 2;
    if (count(line_ends[mid - 1]) <= opt.prompt_tokens) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const std::string_view prompt = std::string_view(corpus).substr(0, lo ? line_ends[lo - 1] : 0);
  const size_t prompt_tokens = prompt.empty() ? 0 : count(prompt.size());
  std::vector<double> prompt_s;
  std::vector<double> prompt_cpu_s;
  for (int r = 0; r < opt.prompt_runs + 3; ++r) {
    const double cpu_start = ThreadCpuSeconds();
    const Clock::time_point start = Clock::now();
    const size_t n = tok.Encode(prompt, encode_options)->size();
    const double s = SecondsSince(start);
    const double cpu_s = ThreadCpuSeconds() - cpu_start;
    if (n != prompt_tokens) return 1;
    if (r >= 3) {  // three warm-up runs
      prompt_s.push_back(s);
      prompt_cpu_s.push_back(cpu_s);
    }
  }

  char hash_hex[16];
  std::snprintf(hash_hex, sizeof(hash_hex), "%08x", hash.h);
  nlohmann::json j = {
      {"impl", "baton"},
      {"tokenizer", opt.tokenizer},
      {"corpus", opt.corpus},
      {"corpus_bytes", corpus.size()},
      {"chunks", chunks.size()},
      {"chunk_bytes", opt.chunk_bytes},
      {"parse_special", opt.parse_special},
      {"tokens", tokens},
      {"ids_fnv1a32", hash_hex},
      {"load_ms", load_s * 1e3},
      {"repeat", opt.repeat},
      {"pass_s", pass_s},
      {"mb_per_s_best", mb / best_s},
      {"mb_per_s_median", mb / median_s},
      {"mb_per_s_cpu_best", mb / Quantile(pass_cpu_s, 0.0)},
      {"mb_per_s_cpu_median", mb / Quantile(pass_cpu_s, 0.5)},
      {"tokens_per_s_best", static_cast<double>(tokens) / best_s},
      {"tokens_per_s_median", static_cast<double>(tokens) / median_s},
      {"prompt_bytes", prompt.size()},
      {"prompt_tokens", prompt_tokens},
      {"prompt_runs", opt.prompt_runs},
      {"prompt_ms_median", Quantile(prompt_s, 0.5) * 1e3},
      {"prompt_ms_p90", Quantile(prompt_s, 0.9) * 1e3},
      {"prompt_ms_best", Quantile(prompt_s, 0.0) * 1e3},
      {"prompt_cpu_ms_median", Quantile(prompt_cpu_s, 0.5) * 1e3},
      {"prompt_cpu_ms_p90", Quantile(prompt_cpu_s, 0.9) * 1e3},
  };
  if (opt.json) {
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("tokenizer   %s (loaded in %.0f ms)\n", opt.tokenizer.c_str(), load_s * 1e3);
  std::printf("corpus      %s: %zu bytes, %zu chunks of >= %zu bytes\n", opt.corpus.c_str(),
              corpus.size(), chunks.size(), opt.chunk_bytes);
  std::printf("tokens      %zu (%.2f bytes/token), ids fnv1a32 %s\n", tokens,
              static_cast<double>(corpus.size()) / static_cast<double>(tokens), hash_hex);
  std::printf(
      "throughput  %.2f MB/s best, %.2f MB/s median of %d (thread CPU time: %.2f best); "
      "%.0f tokens/s best\n",
      mb / best_s, mb / median_s, opt.repeat, j["mb_per_s_cpu_best"].get<double>(),
      static_cast<double>(tokens) / best_s);
  std::printf(
      "prompt      %zu tokens (%zu bytes): %.2f ms median, %.2f ms p90, %.2f ms best of %d "
      "(thread CPU time: %.2f ms median)\n",
      prompt_tokens, prompt.size(), Quantile(prompt_s, 0.5) * 1e3, Quantile(prompt_s, 0.9) * 1e3,
      Quantile(prompt_s, 0.0) * 1e3, opt.prompt_runs, Quantile(prompt_cpu_s, 0.5) * 1e3);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  CLI::App app{
      "Single-threaded encode throughput of a Baton tokenizer on a corpus file (chunks of "
      "whole lines), and the latency of encoding a ~32k-token prompt."};
  app.add_option("--tokenizer", opt.tokenizer, "tokenizer.json, .gguf, or model directory")
      ->required();
  app.add_option("--corpus", opt.corpus, "UTF-8 text file (bench/make_corpus.py writes one)")
      ->required();
  app.add_option("--repeat", opt.repeat, "timed passes over the corpus")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_flag("--json", opt.json, "print one JSON object instead of text");
  app.add_option("--chunk-bytes", opt.chunk_bytes, "minimum chunk size; chunks are whole lines")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 24));
  app.add_option("--prompt-tokens", opt.prompt_tokens, "token budget of the prompt prefix")
      ->capture_default_str();
  app.add_option("--prompt-runs", opt.prompt_runs, "timed encodes of the prompt")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_flag("!--no-parse-special", opt.parse_special,
               "do not look for special-token text in the input (tiktoken's encode_ordinary)");
  CLI11_PARSE(app, argc, argv);
  return Run(opt);
}
