// Decode throughput with a JSON schema against the same requests unconstrained, on the
// same engine and model, alternating in one run (docs/perf/structured_outputs.md). The
// issue's goal: within 5% at 16 concurrent sequences.
//
// Each round submits `concurrency` requests at once (random prompts, temperature 1,
// per-request seeds, ignore_eos and the same max_tokens, so both modes generate the same
// number of tokens: a constrained sequence whose document is complete goes on with EOS)
// and times from the first submit to the last token. The constrained mode pays for the
// mask of every sequence at every step (grammar/), nothing else.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "engine/engine.h"

namespace baton {
namespace {

using Clock = std::chrono::steady_clock;

// Nested enough to keep the grammar busy (objects in arrays, enums, numbers, strings)
// and long enough that documents rarely finish inside max_tokens.
constexpr char kSchema[] = R"({"type": "object", "properties": {
  "title": {"type": "string"},
  "entries": {"type": "array", "items": {"type": "object", "properties": {
      "name": {"type": "string"},
      "kind": {"type": "string", "enum": ["person", "place", "thing", "idea"]},
      "score": {"type": "number"},
      "tags": {"type": "array", "items": {"type": "string"}},
      "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
    "required": ["name", "kind", "score", "tags", "note"], "additionalProperties": false}}},
  "required": ["title", "entries"], "additionalProperties": false})";

struct Round {
  double seconds = 0;
  int64_t tokens = 0;
};

Round Serve(engine::Engine* engine, const std::vector<engine::EngineRequest>& requests) {
  Round r;
  const auto start = Clock::now();
  std::vector<std::shared_ptr<engine::RequestStream>> streams;
  for (const engine::EngineRequest& req : requests) {
    auto s = engine->Submit(req);
    if (!s.ok()) {
      std::fprintf(stderr, "constrained_decode_bench: %s\n",
                   std::string(s.status().message()).c_str());
      std::exit(1);
    }
    streams.push_back(*s);
  }
  for (auto& s : streams) {
    engine::TokenEvent e;
    while (s->Next(&e)) {
      r.tokens += static_cast<int64_t>(e.token_ids.size());
      if (e.finished && !e.status.ok()) {
        std::fprintf(stderr, "constrained_decode_bench: request failed: %s\n",
                     std::string(e.status.message()).c_str());
        std::exit(1);
      }
    }
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

std::string CpuName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

int Main(int argc, char** argv) {
  CLI::App app{
      "Decode throughput with a JSON schema (constrained decoding) against "
      "the same requests unconstrained"};
  std::string model_path;
  int concurrency = 16;
  int64_t tokens = 48;
  int prompt_len = 32;
  int rounds = 3;
  int threads = 0;
  app.add_option("--model", model_path, "Model directory or .gguf")->required();
  app.add_option("--concurrency", concurrency, "Sequences decoding together")
      ->check(CLI::Range(1, 256));
  app.add_option("--tokens", tokens, "Tokens each sequence generates")->check(CLI::Range(2, 4096));
  app.add_option("--prompt-len", prompt_len, "Prompt tokens")->check(CLI::Range(1, 4096));
  app.add_option("--rounds", rounds, "Rounds of each mode, alternating")->check(CLI::Range(1, 100));
  app.add_option("--threads", threads, "Compute threads (0: one per core)");
  CLI11_PARSE(app, argc, argv);

  std::fprintf(stderr, "constrained_decode_bench: loading %s\n", model_path.c_str());
  absl::StatusOr<engine::LoadedModel> model = engine::LoadModel(model_path);
  if (!model.ok()) {
    std::fprintf(stderr, "constrained_decode_bench: %s\n",
                 std::string(model.status().message()).c_str());
    return 1;
  }
  engine::EngineOptions options;
  options.threads = threads;
  options.max_running = concurrency;
  options.kv_cache_bytes = int64_t{512} << 20;
  auto engine = engine::Engine::Create(&*model, options);
  if (!engine.ok()) {
    std::fprintf(stderr, "constrained_decode_bench: %s\n",
                 std::string(engine.status().message()).c_str());
    return 1;
  }
  std::mt19937 rng(7);
  const int32_t vocab = model->tokenizer.tokenizer->vocab_size();
  std::vector<engine::EngineRequest> plain;
  for (int i = 0; i < concurrency; ++i) {
    engine::EngineRequest r;
    for (int k = 0; k < prompt_len; ++k)
      r.prompt_ids.push_back(3 + static_cast<int32_t>(rng() % (vocab - 3)));
    r.params.temperature = 1.0;
    r.params.seed = 100 + static_cast<uint64_t>(i);
    r.params.max_tokens = tokens;
    r.params.ignore_eos = true;
    r.detokenize = false;
    plain.push_back(std::move(r));
  }
  std::vector<engine::EngineRequest> constrained = plain;
  for (auto& r : constrained) {
    r.params.constraint.kind = engine::OutputConstraint::Kind::kJsonSchema;
    r.params.constraint.json_schema = kSchema;
  }
  // Once each, untimed: the grammar is compiled and the engine warm.
  (void)Serve(engine->get(), constrained);
  (void)Serve(engine->get(), plain);
  std::vector<double> plain_rate, constrained_rate, round_ratio;
  for (int round = 0; round < rounds; ++round) {
    for (auto& r : plain) r.id = "p" + std::to_string(round) + "-" + std::to_string(&r - &plain[0]);
    for (auto& r : constrained)
      r.id = "c" + std::to_string(round) + "-" + std::to_string(&r - &constrained[0]);
    // The order alternates too, so a machine slowing down or speeding up within a run
    // does not favour one mode.
    Round p, c;
    if (round % 2 == 0) {
      p = Serve(engine->get(), plain);
      c = Serve(engine->get(), constrained);
    } else {
      c = Serve(engine->get(), constrained);
      p = Serve(engine->get(), plain);
    }
    plain_rate.push_back(static_cast<double>(p.tokens) / p.seconds);
    constrained_rate.push_back(static_cast<double>(c.tokens) / c.seconds);
    round_ratio.push_back(constrained_rate.back() / plain_rate.back());
    std::fprintf(stderr, "round %d: plain %.1f tok/s, schema %.1f tok/s, ratio %.3f\n", round + 1,
                 plain_rate.back(), constrained_rate.back(), round_ratio.back());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double p = median(plain_rate), c = median(constrained_rate);
  std::printf("cpu: %s\nmodel: %s (vocab %d)\nconcurrency %d, %lld tokens each, %d rounds\n",
              CpuName().c_str(), model_path.c_str(), vocab, concurrency,
              static_cast<long long>(tokens), rounds);
  std::printf("unconstrained: %.1f tok/s (median)\nwith schema:   %.1f tok/s (median)\n", p, c);
  std::printf("ratio of the medians: %.3f\n", c / p);
  // Each round's two runs are neighbours in time: their ratio is the steadier figure on a
  // shared machine.
  std::printf("median of the rounds' ratios: %.3f (goal >= 0.95)\n", median(round_ratio));
  return 0;
}

}  // namespace
}  // namespace baton

int main(int argc, char** argv) { return baton::Main(argc, argv); }
