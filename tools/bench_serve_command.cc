#include "tools/bench_serve_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "common/log.h"
#include "common/status.h"
#include "common/strings.h"
#include "nlohmann/json.hpp"
#include "tokenizer/loader.h"
#include "tools/bench_serve_dataset.h"
#include "tools/bench_serve_grpc_client.h"
#include "tools/bench_serve_http_client.h"
#include "tools/bench_serve_load.h"
#include "tools/bench_serve_report.h"
#include "tools/bench_serve_stats.h"

namespace baton::tools {
namespace {

struct BenchServeFlags {
  std::string backend = "openai";
  std::string base_url;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string endpoint;
  std::string grpc_target = "127.0.0.1:50051";
  int grpc_channels = 1;
  std::string model;
  std::string api_key;
  std::string tokenizer;
  std::string dataset = "random";
  int64_t num_prompts = 1000;
  uint64_t seed = 0;
  int64_t random_input_len = 1024;
  int64_t random_output_len = 128;
  double random_range_ratio = 0.0;
  int64_t num_prefixes = 10;
  int64_t prefix_len = 256;
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  int64_t max_concurrency = 0;
  double temperature = 0.0;
  bool ignore_eos = true;
  bool send_text = false;
  std::string extra_body;
  double request_timeout = 600;
  std::string percentiles = "99";
  std::vector<std::string> goodput;
  std::string result_file;
  bool save_detailed = false;
  bool no_test_request = false;
  bool quiet = false;
};

// CLI11's own number checks print their range's bounds (1.8e308) instead of the
// problem; these name the expectation.
CLI::Validator Positive() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        if (absl::SimpleAtod(text, &v) && v > 0) return "";
        return StrCat("must be a number above 0, not '", text, "'");
      },
      "POSITIVE");
}

CLI::Validator NonNegative() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        if (absl::SimpleAtod(text, &v) && v >= 0) return "";
        return StrCat("must be a number of at least 0, not '", text, "'");
      },
      "NONNEGATIVE");
}

// Prints a line each time another tenth of the requests is done, and at least every
// few seconds while some are, so a long run shows it is alive without flooding a log.
class Progress {
 public:
  explicit Progress(int64_t total) : total_(total) {}

  void operator()(int64_t done, int64_t failed, double elapsed_s) {
    const int64_t tenth = done * 10 / total_;
    if (tenth == last_tenth_ && elapsed_s - last_print_s_ < 5.0 && done != total_) return;
    last_tenth_ = tenth;
    last_print_s_ = elapsed_s;
    LogInfo("bench: %lld/%lld done (%lld failed), %.1f s, %.2f req/s", static_cast<long long>(done),
            static_cast<long long>(total_), static_cast<long long>(failed), elapsed_s,
            elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0.0);
  }

 private:
  int64_t total_;
  int64_t last_tenth_ = 0;
  double last_print_s_ = 0;
};

// The few distinct reasons requests failed, most frequent first.
void PrintErrors(const std::vector<RequestResult>& results) {
  std::map<std::string, int64_t> counts;
  for (const RequestResult& r : results) {
    if (!r.success) ++counts[r.error];
  }
  if (counts.empty()) return;
  std::vector<std::pair<int64_t, std::string>> sorted;
  for (auto& [error, n] : counts) sorted.emplace_back(n, error);
  std::sort(sorted.rbegin(), sorted.rend());
  LogWarn("bench: failures by reason:");
  for (size_t i = 0; i < sorted.size() && i < 5; ++i) {
    LogWarn("  %lld x %s", static_cast<long long>(sorted[i].first), sorted[i].second.c_str());
  }
  if (sorted.size() > 5) LogWarn("  ... and %zu more", sorted.size() - 5);
}

std::string Now() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &tm);
  return buf;
}

absl::StatusOr<std::unique_ptr<BenchClient>> MakeClient(const BenchServeFlags& f,
                                                        RequestOptions request,
                                                        std::string* model) {
  if (f.backend == "baton-grpc") {
    return std::make_unique<GrpcBenchClient>(GrpcClientOptions{
        .target = f.grpc_target, .request = request, .channels = f.grpc_channels});
  }
  HttpClientOptions http;
  http.api = f.backend == "openai-chat" ? OpenAiApi::kChat : OpenAiApi::kCompletions;
  const std::string base_url =
      f.base_url.empty() ? StrCat("http://", f.host, ":", f.port) : f.base_url;
  BATON_ASSIGN_OR_RETURN(http.url, ParseHttpUrl(base_url));
  http.path = !f.endpoint.empty()            ? f.endpoint
              : http.api == OpenAiApi::kChat ? "/v1/chat/completions"
                                             : "/v1/completions";
  if (!http.path.starts_with('/')) {
    return absl::InvalidArgumentError(
        StrCat("--endpoint ", f.endpoint, " must start with '/' (e.g. /v1/completions)"));
  }
  if (!f.extra_body.empty()) {
    try {
      http.extra_body = nlohmann::json::parse(f.extra_body);
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(StrCat("--extra-body is not JSON: ", e.what()));
    }
    if (!http.extra_body.is_object()) {
      return absl::InvalidArgumentError(StrCat(
          "--extra-body must be a JSON object (e.g. '{\"top_p\": 0.9}'), not ", f.extra_body));
    }
  }
  http.request = request;
  auto client = std::make_unique<HttpBenchClient>(http);
  if (model->empty()) {
    // OpenAI servers require a model name; ask the server for its first, as vLLM does.
    BATON_ASSIGN_OR_RETURN(*model, client->FetchFirstModel());
    request.model = *model;
    http.request = request;
    client = std::make_unique<HttpBenchClient>(http);
  }
  return client;
}

absl::Status Run(const BenchServeFlags& f) {
  BATON_ASSIGN_OR_RETURN(std::vector<double> percentiles, ParsePercentiles(f.percentiles));
  BATON_ASSIGN_OR_RETURN(SloTargets slos, ParseGoodput(f.goodput));
  if (f.backend == "baton-grpc" && !f.extra_body.empty()) {
    return absl::InvalidArgumentError("--extra-body applies to the HTTP backends only");
  }

  std::shared_ptr<const tokenizer::Tokenizer> tok;
  if (!f.tokenizer.empty()) {
    auto files = tokenizer::LoadTokenizerFiles(f.tokenizer);
    if (!files.ok()) {
      return absl::InvalidArgumentError(
          StrCat("--tokenizer ", f.tokenizer, ": ", files.status().message()));
    }
    tok = files->tokenizer;
  }
  DatasetOptions data{.kind = f.dataset == "prefix" ? DatasetKind::kPrefix : DatasetKind::kRandom,
                      .num_prompts = f.num_prompts,
                      .seed = f.seed,
                      .input_len = f.random_input_len,
                      .output_len = f.random_output_len,
                      .range_ratio = f.random_range_ratio,
                      .num_prefixes = f.num_prefixes,
                      .prefix_len = f.prefix_len};
  BATON_ASSIGN_OR_RETURN(std::vector<BenchPrompt> prompts, MakeDataset(data, tok.get()));

  RequestOptions request{.model = f.model,
                         .api_key = f.api_key,
                         .temperature = f.temperature,
                         .ignore_eos = f.ignore_eos,
                         .send_token_ids = !f.send_text,
                         .timeout_s = f.request_timeout};
  if (request.api_key.empty()) {
    // What OpenAI's own clients read, so one exported key serves both.
    if (const char* key = std::getenv("OPENAI_API_KEY")) request.api_key = key;
  }
  std::string model = f.model;
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<BenchClient> client, MakeClient(f, request, &model));

  if (!f.quiet) {
    int64_t exact = 0;
    for (const BenchPrompt& p : prompts) exact += p.text_is_exact ? 1 : 0;
    LogInfo("bench: %lld %s prompts, %s; backend %s, model %s",
            static_cast<long long>(prompts.size()), f.dataset.c_str(),
            tok ? StrCat("token counts exact (", exact, " also as text)").c_str()
                : "approximate lengths (random words; give --tokenizer for exact tokens)",
            f.backend.c_str(), model.empty() ? "(server default)" : model.c_str());
    LogInfo("bench: request rate %g/s, burstiness %g, max concurrency %s", f.request_rate,
            f.burstiness, f.max_concurrency > 0 ? StrCat(f.max_concurrency).c_str() : "unlimited");
  }
  if (!f.no_test_request) {
    RequestResult test = client->Send(prompts[0]);
    if (!test.success) {
      return absl::UnavailableError(StrCat("the test request failed: ", test.error,
                                           " (skip this check with --no-test-request)"));
    }
    if (!f.quiet) LogInfo("bench: test request ok, starting the benchmark");
  }

  Progress progress(static_cast<int64_t>(prompts.size()));
  LoadOptions load;
  load.request_rate = f.request_rate;
  load.burstiness = f.burstiness;
  load.max_concurrency = f.max_concurrency;
  load.seed = f.seed;
  if (!f.quiet) load.on_done = std::ref(progress);
  BATON_ASSIGN_OR_RETURN(LoadResult run, RunLoad(*client, prompts, load));

  const BenchMetrics metrics = ComputeMetrics(run.results, run.duration_s, percentiles, slos);
  PrintErrors(run.results);
  std::fputs(FormatReport(metrics).c_str(), stdout);
  std::fflush(stdout);

  if (!f.result_file.empty()) {
    nlohmann::ordered_json doc;
    doc["date"] = Now();
    doc["backend"] = f.backend;
    doc["model_id"] = model;
    doc["tokenizer_id"] = f.tokenizer;
    doc["dataset"] = f.dataset;
    doc["num_prompts"] = f.num_prompts;
    doc["random_input_len"] = f.random_input_len;
    doc["random_output_len"] = f.random_output_len;
    doc["random_range_ratio"] = f.random_range_ratio;
    if (data.kind == DatasetKind::kPrefix) {
      doc["num_prefixes"] = f.num_prefixes;
      doc["prefix_len"] = f.prefix_len;
    }
    doc["seed"] = f.seed;
    // JSON has no infinity; vLLM writes the string "inf".
    doc["request_rate"] =
        std::isfinite(f.request_rate) ? nlohmann::ordered_json(f.request_rate) : "inf";
    doc["burstiness"] = f.burstiness;
    doc["max_concurrency"] =
        f.max_concurrency > 0 ? nlohmann::ordered_json(f.max_concurrency) : nullptr;
    doc.update(MetricsJson(metrics));
    if (f.save_detailed) doc.update(DetailedJson(run.results));
    std::ofstream out(f.result_file);
    out << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!out) {
      return absl::InternalError(StrCat("could not write --result-file ", f.result_file));
    }
  }
  if (metrics.completed == 0) {
    return absl::UnavailableError("every request failed (reasons above)");
  }
  return absl::OkStatus();
}

}  // namespace

void AddBenchCommand(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmark a running server");
  bench->require_subcommand(1);
  auto f = std::make_shared<BenchServeFlags>();
  CLI::App* cmd = bench->add_subcommand(
      "serve",
      "Load-test a running server over its OpenAI HTTP or gRPC API and report throughput and "
      "latency (TTFT, TPOT, ITL, E2EL), like vLLM's `bench serve`");
  cmd->option_defaults()->always_capture_default();

  cmd->add_option("--backend", f->backend,
                  "openai: /v1/completions; openai-chat: /v1/chat/completions (both streamed "
                  "over SSE); baton-grpc: baton.v1.Baton/Generate")
      ->check(CLI::IsMember({"openai", "openai-chat", "baton-grpc"}));
  cmd->add_option("--base-url", f->base_url,
                  "Server URL, http://HOST:PORT[/PREFIX] (overrides --host and --port)")
      ->envname("BATON_BASE_URL");
  cmd->add_option("--host", f->host, "HTTP server host");
  cmd->add_option("--port", f->port, "HTTP server port")->check(CLI::Range(1, 65535));
  cmd->add_option("--endpoint", f->endpoint,
                  "HTTP path (default: /v1/completions or /v1/chat/completions by --backend)");
  cmd->add_option("--grpc-target", f->grpc_target, "gRPC server HOST:PORT (baton-grpc)")
      ->envname("BATON_GRPC_TARGET");
  cmd->add_option("--grpc-channels", f->grpc_channels,
                  "gRPC connections to spread concurrent streams over")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--model", f->model,
                  "Model name sent with each request (default: HTTP asks /v1/models for the "
                  "first; gRPC sends none, meaning the served model)")
      // A name, not the path BATON_MODEL holds for the servers (common/cli_setup.h).
      ->envname("BATON_BENCH_MODEL");
  cmd->add_option("--api-key", f->api_key,
                  "Sent as 'Authorization: Bearer KEY' (default: $OPENAI_API_KEY)")
      ->envname("BATON_API_KEY");
  cmd->add_option("--tokenizer", f->tokenizer,
                  "tokenizer.json, GGUF file or model directory: prompts of exact token counts "
                  "(without it, random words of about one token each)")
      ->envname("BATON_TOKENIZER");

  cmd->add_option("--dataset", f->dataset,
                  "random: independent random prompts; prefix: --num-prefixes groups sharing "
                  "a --prefix-len prefix, each followed by a random suffix")
      ->check(CLI::IsMember({"random", "prefix"}));
  cmd->add_option("--num-prompts", f->num_prompts, "Requests to send")
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));
  cmd->add_option("--seed", f->seed, "Seed of the prompts, lengths and arrival times");
  cmd->add_option("--random-input-len", f->random_input_len,
                  "Prompt tokens (prefix dataset: tokens after the shared prefix)")
      ->check(NonNegative());
  cmd->add_option("--random-output-len", f->random_output_len,
                  "Output tokens requested (max_tokens)")
      ->check(Positive());
  cmd->add_option("--random-range-ratio", f->random_range_ratio,
                  "Draw lengths uniformly from [len*(1-r), len*(1+r)]")
      ->check(CLI::Range(0.0, 0.999999));
  cmd->add_option("--num-prefixes", f->num_prefixes, "Prefix dataset: distinct shared prefixes")
      ->check(Positive());
  cmd->add_option("--prefix-len", f->prefix_len, "Prefix dataset: tokens in each shared prefix")
      ->check(Positive());

  cmd->add_option("--request-rate", f->request_rate,
                  "Requests per second, arriving as a Poisson process (inf: all at once)")
      ->check(Positive());
  cmd->add_option("--burstiness", f->burstiness,
                  "Gamma shape of the arrival gaps: 1 is Poisson, <1 burstier, >1 steadier")
      ->check(Positive());
  cmd->add_option("--max-concurrency", f->max_concurrency,
                  "Requests in flight at most (0: no limit; each in-flight request takes a "
                  "connection, HTTP, or a stream, gRPC; all run on one client thread)")
      ->check(NonNegative());
  cmd->add_option("--request-timeout", f->request_timeout,
                  "Seconds a request may take before it counts as failed")
      ->check(Positive());

  cmd->add_option("--temperature", f->temperature, "Sampling temperature (0: greedy)")
      ->check(NonNegative());
  cmd->add_flag("--ignore-eos,!--no-ignore-eos", f->ignore_eos,
                "Ask the server to generate all max_tokens tokens, past end-of-sequence (on by "
                "default)");
  cmd->add_flag("--send-text", f->send_text,
                "openai and baton-grpc: send prompt text even when token ids are known");
  cmd->add_option("--extra-body", f->extra_body,
                  "JSON object merged into each HTTP request body, e.g. '{\"top_p\": 0.9}'");

  cmd->add_option("--percentiles", f->percentiles,
                  "Percentiles to report besides mean and median, e.g. 50,90,99");
  cmd->add_option("--goodput", f->goodput,
                  "SLOs in ms, KEY:MS with KEY ttft, tpot or e2el (e.g. --goodput ttft:200 "
                  "tpot:50); reports requests/s that meet all of them")
      ->expected(1, 3);
  cmd->add_option("--result-file", f->result_file, "Also write the results to this JSON file");
  cmd->add_flag("--save-detailed", f->save_detailed,
                "With --result-file, add per-request lengths, latencies and errors");
  cmd->add_flag("--no-test-request", f->no_test_request,
                "Do not send the first prompt once alone before the benchmark");
  cmd->add_flag("--quiet", f->quiet, "No progress or setup lines on stderr");

  cmd->callback([f] {
    absl::Status status = Run(*f);
    if (!status.ok()) {
      std::cerr << "baton bench serve: " << status.message() << "\n";
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace baton::tools
