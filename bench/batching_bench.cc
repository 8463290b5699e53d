// Continuous batching against serving one request at a time and against static batching,
// on the same engine, model and requests, in the same run. docs/perf/batching.md.
//
// The workload: N requests with random prompts and output lengths drawn uniformly from
// the given ranges, greedy, ignore_eos (so every mode generates exactly the same tokens).
//   - sequential: one request at a time (max_running 1);
//   - static:     batches of B submitted together; the next batch starts when the whole
//                 batch is done (what a server without continuous batching does);
//   - continuous: all requests queued at once, up to max_running decoding together, new
//                 ones joining as others finish.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "engine/engine.h"

namespace baton {
namespace {

using Clock = std::chrono::steady_clock;

struct Run {
  std::string name;
  double seconds = 0;
  int64_t output_tokens = 0;
  double mean_ttft = 0;
  std::vector<std::vector<int32_t>> outputs;
};

// Serves `requests` in groups of `group` (all at once when group >= size), each group
// submitted together and drained before the next.
Run Serve(const engine::LoadedModel& model, engine::EngineOptions options,
          const std::vector<engine::EngineRequest>& requests, size_t group,
          const std::string& name) {
  auto engine = engine::Engine::Create(&model, options);
  if (!engine.ok()) {
    std::fprintf(stderr, "batching_bench: %s\n", std::string(engine.status().message()).c_str());
    std::exit(1);
  }
  Run run;
  run.name = name;
  run.outputs.resize(requests.size());
  double ttft_sum = 0;
  const auto start = Clock::now();
  for (size_t first = 0; first < requests.size(); first += group) {
    const size_t last = std::min(requests.size(), first + group);
    std::vector<std::shared_ptr<engine::RequestStream>> streams;
    std::vector<double> submitted;
    for (size_t i = first; i < last; ++i) {
      submitted.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      auto s = (*engine)->Submit(requests[i]);
      if (!s.ok()) {
        std::fprintf(stderr, "batching_bench: %s\n", std::string(s.status().message()).c_str());
        std::exit(1);
      }
      streams.push_back(*s);
    }
    for (size_t i = first; i < last; ++i) {
      engine::TokenEvent e;
      while (streams[i - first]->Next(&e)) {
        run.outputs[i].insert(run.outputs[i].end(), e.token_ids.begin(), e.token_ids.end());
        if (e.finished) {
          if (!e.status.ok()) {
            std::fprintf(stderr, "batching_bench: request failed: %s\n",
                         std::string(e.status.message()).c_str());
            std::exit(1);
          }
          // Time to first token counted from the benchmark's start: the wait behind
          // earlier requests is what a user of that serving mode sees.
          ttft_sum += submitted[i - first] + e.timings.time_to_first_token_seconds;
        }
      }
      run.output_tokens += static_cast<int64_t>(run.outputs[i].size());
    }
  }
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  run.mean_ttft = ttft_sum / static_cast<double>(requests.size());
  return run;
}

}  // namespace
}  // namespace baton

int main(int argc, char** argv) {
  CLI::App app{"Continuous batching vs one-at-a-time vs static batching (output tokens/s)"};
  std::string model_path = "build/bench-models/smollm2-135m";
  int requests = 64, threads = 0, static_batch = 16, max_running = 64;
  int min_prompt = 32, max_prompt = 256, min_output = 16, max_output = 128;
  uint32_t seed = 1;
  bool skip_sequential = false;
  app.add_option("--model", model_path, "Model (.gguf or HF directory)");
  app.add_option("--requests", requests, "Number of requests")->check(CLI::Range(1, 100000));
  app.add_option("--threads", threads, "Compute threads (0: one per core)");
  app.add_option("--static-batch", static_batch, "Batch size of the static mode")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-running", max_running, "Running sequences in the continuous mode")
      ->check(CLI::PositiveNumber);
  app.add_option("--prompt-len", min_prompt, "Shortest prompt")->check(CLI::PositiveNumber);
  app.add_option("--max-prompt-len", max_prompt, "Longest prompt")->check(CLI::PositiveNumber);
  app.add_option("--output-len", min_output, "Fewest output tokens")->check(CLI::PositiveNumber);
  app.add_option("--max-output-len", max_output, "Most output tokens")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "Workload seed");
  app.add_flag("--skip-sequential", skip_sequential, "Leave out the (slowest) sequential mode");
  CLI11_PARSE(app, argc, argv);
  if (max_prompt < min_prompt || max_output < min_output) {
    std::fprintf(stderr, "batching_bench: the maximum lengths must be >= the minimum ones\n");
    return 2;
  }

  auto loaded = baton::engine::LoadModel(model_path);
  if (!loaded.ok()) {
    std::fprintf(stderr, "batching_bench: %s\n", std::string(loaded.status().message()).c_str());
    return 1;
  }
  const int64_t vocab = loaded->model->config().vocab_size;
  std::mt19937 rng(seed);
  std::vector<baton::engine::EngineRequest> reqs(requests);
  int64_t prompt_tokens = 0;
  for (auto& r : reqs) {
    const int plen = std::uniform_int_distribution<int>(min_prompt, max_prompt)(rng);
    for (int i = 0; i < plen; ++i) {
      r.prompt_ids.push_back(
          std::uniform_int_distribution<int32_t>(0, static_cast<int32_t>(vocab - 1))(rng));
    }
    prompt_tokens += plen;
    r.params.temperature = 0;
    r.params.ignore_eos = true;
    r.params.max_tokens = std::uniform_int_distribution<int>(min_output, max_output)(rng);
    r.detokenize = false;
  }

  baton::engine::EngineOptions options;
  options.threads = threads;
  options.kv_cache_bytes = int64_t{2} << 30;
  options.enable_prefix_cache = false;  // random prompts share nothing; keep it out of the way
  options.max_batched_tokens = 2048;
  options.max_prefill_chunk = 512;
  options.max_waiting = requests + 1;

  std::printf("batching_bench: %s, %d requests, prompts %d-%d (%lld tokens), outputs %d-%d\n",
              model_path.c_str(), requests, min_prompt, max_prompt,
              static_cast<long long>(prompt_tokens), min_output, max_output);
  std::vector<baton::Run> runs;
  if (!skip_sequential) {
    options.max_running = 1;
    runs.push_back(baton::Serve(*loaded, options, reqs, 1, "sequential"));
    std::fprintf(stderr, "  sequential done in %.1f s\n", runs.back().seconds);
  }
  options.max_running = static_batch;
  runs.push_back(baton::Serve(*loaded, options, reqs, static_batch,
                              "static (batches of " + std::to_string(static_batch) + ")"));
  std::fprintf(stderr, "  static done in %.1f s\n", runs.back().seconds);
  options.max_running = max_running;
  runs.push_back(baton::Serve(*loaded, options, reqs, reqs.size(),
                              "continuous (max " + std::to_string(max_running) + ")"));
  std::fprintf(stderr, "  continuous done in %.1f s\n", runs.back().seconds);

  const baton::Run& cont = runs.back();
  bool same = true;
  for (const auto& r : runs) same = same && r.outputs == cont.outputs;
  std::printf("%-28s %10s %12s %14s %12s\n", "mode", "seconds", "output tok", "output tok/s",
              "mean TTFT s");
  for (const auto& r : runs) {
    std::printf("%-28s %10.2f %12lld %14.1f %12.2f\n", r.name.c_str(), r.seconds,
                static_cast<long long>(r.output_tokens), r.output_tokens / r.seconds, r.mean_ttft);
  }
  const double cont_rate = cont.output_tokens / cont.seconds;
  for (size_t i = 0; i + 1 < runs.size(); ++i) {
    std::printf("continuous / %s: %.2fx output tokens/s\n", runs[i].name.c_str(),
                cont_rate / (runs[i].output_tokens / runs[i].seconds));
  }
  std::printf("every mode generated the same tokens: %s\n", same ? "yes" : "NO");
  return same ? 0 : 1;
}
