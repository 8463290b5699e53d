#include "tools/generate_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/log.h"
#include "common/status.h"
#include "common/strings.h"
#include "common/thread_pool.h"
#include "engine/device.h"
#include "engine/generator.h"
#include "engine/gpu_backend.h"
#include "engine/loaded_model.h"
#include "engine/model_runner.h"
#include "kernels/cpu/matmul.h"
#include "nlohmann/json.hpp"
#include "template/chat_prompt.h"
#include "template/chat_template_file.h"
#include "worker/worker_runtime.h"

namespace baton::tools {
namespace {

struct GenerateFlags {
  std::string model;
  std::string prompt;
  bool chat = false;
  std::string system;
  std::string chat_template;
  bool no_special = false;
  int64_t max_tokens = 128;
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  double min_p = 0.0;
  double repetition_penalty = 1.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  std::vector<std::string> logit_bias;
  int64_t seed = -1;
  int32_t logprobs = -1;
  std::vector<std::string> stop;
  std::string stop_ids;
  bool ignore_eos = false;
  bool json = false;
  std::string logits_out;
  int threads = 0;
  engine::DeviceOptions device;
  std::string kv_cache_dtype = "bf16";
  int64_t prefill_chunk = 512;
  bool quiet = false;
  bool no_mmap = false;
  std::string quant_activations = "int8";
};

absl::StatusOr<std::vector<int32_t>> ParseIds(const std::string& text, const char* flag) {
  std::vector<int32_t> ids;
  for (absl::string_view word : absl::StrSplit(text, absl::ByAnyChar(", "), absl::SkipEmpty())) {
    int32_t id = 0;
    if (!absl::SimpleAtoi(word, &id)) {
      return absl::InvalidArgumentError(StrCat(flag, " takes token ids separated by commas; '",
                                               std::string(word), "' is not an integer"));
    }
    ids.push_back(id);
  }
  return ids;
}

absl::StatusOr<engine::SamplingParams> ToParams(const GenerateFlags& f) {
  engine::SamplingParams p;
  p.max_tokens = f.max_tokens;
  p.temperature = f.temperature;
  p.top_k = f.top_k;
  p.top_p = f.top_p;
  p.min_p = f.min_p;
  p.repetition_penalty = f.repetition_penalty;
  p.presence_penalty = f.presence_penalty;
  p.frequency_penalty = f.frequency_penalty;
  if (f.seed >= 0) p.seed = static_cast<uint64_t>(f.seed);
  p.logprobs = f.logprobs;
  p.stop = f.stop;
  p.ignore_eos = f.ignore_eos;
  BATON_ASSIGN_OR_RETURN(p.stop_token_ids, ParseIds(f.stop_ids, "--stop-ids"));
  for (const std::string& entry : f.logit_bias) {
    std::vector<std::string> parts = absl::StrSplit(entry, '=');
    int32_t id = 0;
    float bias = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &id) ||
        !absl::SimpleAtof(parts[1], &bias)) {
      return absl::InvalidArgumentError(
          StrCat("--logit-bias takes ID=BIAS (e.g. 13=-100); got '", entry, "'"));
    }
    p.logit_bias.emplace_back(id, bias);
  }
  return p;
}

// Progress on stderr while a large model's pages are read in: a bar on a terminal,
// a line per 10% otherwise.
model::OpenOptions LoadOptions(bool quiet, bool no_mmap, bool int8_activations) {
  model::OpenOptions options;
  options.use_mmap = !no_mmap;
  options.int8_activations = int8_activations;
  if (quiet) return options;
  const bool tty = isatty(fileno(stderr)) != 0;
  auto last = std::make_shared<int>(-1);
  options.progress = [tty, last](uint64_t done, uint64_t total) {
    if (total < (uint64_t{64} << 20)) return;  // small models load at once
    const int percent = static_cast<int>(done * 100 / total);
    if (percent == *last || (!tty && percent / 10 == *last / 10 && percent != 100)) return;
    *last = percent;
    std::fprintf(stderr,
                 tty ? "\rloading weights: %3d%% (%llu / %llu MiB)"
                     : "loading weights: %d%% (%llu / %llu MiB)\n",
                 percent, static_cast<unsigned long long>(done >> 20),
                 static_cast<unsigned long long>(total >> 20));
    if (tty && done == total) std::fputc('\n', stderr);
  };
  return options;
}

nlohmann::json LogprobJson(const tokenizer::Tokenizer& tok, const engine::SampledToken& t) {
  nlohmann::json top = nlohmann::json::array();
  for (const auto& [id, lp] : t.top_logprobs) {
    top.push_back(
        {{"id", id}, {"token", tok.IsValid(id) ? tok.TokenBytes(id) : ""}, {"logprob", lp}});
  }
  return {{"id", t.id}, {"logprob", t.logprob}, {"top_logprobs", top}};
}

absl::Status Run(const GenerateFlags& flags) {
  BATON_RETURN_IF_ERROR(engine::CheckDevice(flags.device));
  const auto load_start = std::chrono::steady_clock::now();
  BATON_ASSIGN_OR_RETURN(
      engine::LoadedModel loaded,
      engine::LoadModel(flags.model, LoadOptions(flags.quiet || flags.json, flags.no_mmap,
                                                 flags.quant_activations == "int8")));
  const double load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  const tokenizer::Tokenizer& tok = *loaded.tokenizer.tokenizer;

  std::string text = flags.prompt;
  bool add_special = !flags.no_special;
  if (flags.chat) {
    if (!flags.chat_template.empty()) {
      BATON_RETURN_IF_ERROR(
          templating::UseChatTemplateFile(flags.chat_template, &loaded.tokenizer.config));
    }
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (!flags.system.empty()) messages.push_back({{"role", "system"}, {"content", flags.system}});
    messages.push_back({{"role", "user"}, {"content", flags.prompt}});
    BATON_ASSIGN_OR_RETURN(text, templating::RenderChatPrompt(loaded.tokenizer.config, messages,
                                                              /*add_generation_prompt=*/true));
    add_special = false;  // the template writes BOS itself
  }
  BATON_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                         tok.Encode(text, {.add_special_tokens = add_special}));
  BATON_ASSIGN_OR_RETURN(engine::SamplingParams params, ToParams(flags));

  ThreadPool threads(flags.threads);
  engine::GenerateOptions options;
  options.prefill_chunk = flags.prefill_chunk;
  options.kv_cache_dtype = flags.kv_cache_dtype;
  options.prompt_logits = !flags.logits_out.empty();
  // --device cuda: the forward on the GPU, over KV pages for this one request there.
  engine::EngineOptions gpu_options;
  gpu_options.max_batched_tokens = std::max<int64_t>(1, flags.prefill_chunk);
  gpu_options.max_running = 1;
  gpu_options.block_size = options.block_size;
  gpu_options.kv_cache_dtype = options.kv_cache_dtype;
  const int64_t context = loaded.model->config().max_position_embeddings;
  const int64_t positions =
      std::min<int64_t>(context, static_cast<int64_t>(ids.size()) + params.max_tokens);
  gpu_options.kv_cache_bytes =
      (positions + options.block_size - 1) / options.block_size *
      engine::PageLayoutFor(loaded.model->config(), options.block_size, options.kv_cache_dtype)
          .page_bytes();
  engine::GpuStart start;
  start.quiet = flags.quiet || flags.json;
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<engine::GpuEngine> gpu,
                         engine::StartGpu(*loaded.model, flags.device, &gpu_options, start));
  if (gpu != nullptr) {
    options.kv_pool_memory = gpu_options.kv_pool_memory;
    options.backend = gpu_options.backend;
  }
  engine::TextSink sink;
  if (!flags.json) {
    sink = [](std::string_view delta) {
      std::fwrite(delta.data(), 1, delta.size(), stdout);
      std::fflush(stdout);
    };
  }
  BATON_ASSIGN_OR_RETURN(engine::GenerateResult result,
                         engine::Generate(loaded, &threads, ids, params, options, sink));

  if (!flags.logits_out.empty()) {
    std::ofstream out(flags.logits_out);
    nlohmann::json doc = {{"input_ids", result.prompt_ids}, {"logits", result.prompt_logits}};
    out << doc.dump() << "\n";
    if (!out) {
      return absl::InternalError(StrCat("could not write --logits-out file ", flags.logits_out));
    }
  }
  const auto& t = result.timings;
  const int64_t decoded = static_cast<int64_t>(result.output_ids.size()) - 1;
  if (flags.json) {
    nlohmann::json doc = {
        {"model", loaded.name},
        {"prompt_ids", result.prompt_ids},
        {"generated_ids", result.output_ids},
        {"text", result.text},
        {"finish_reason", result.finish_reason},
        {"stop_reason", result.stop_reason},
        {"timings",
         {{"load_seconds", load_seconds},
          {"prefill_seconds", t.prefill_seconds},
          {"time_to_first_token_seconds", t.time_to_first_token_seconds},
          {"decode_seconds", t.decode_seconds},
          {"prefill_tokens_per_second",
           t.prefill_seconds > 0 ? static_cast<double>(result.prompt_ids.size()) / t.prefill_seconds
                                 : 0.0},
          {"decode_tokens_per_second", decoded > 0 && t.decode_seconds > 0
                                           ? static_cast<double>(decoded) / t.decode_seconds
                                           : 0.0}}}};
    if (params.logprobs >= 0) {
      nlohmann::json lps = nlohmann::json::array();
      for (const auto& lp : result.logprobs) lps.push_back(LogprobJson(tok, lp));
      doc["logprobs"] = lps;
    }
    std::cout << doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << "\n";
    if (!flags.quiet) {
      LogInfo(
          "[%s] prompt %zu tokens, generated %zu (%s); prefill %.1f tok/s, decode %.1f "
          "tok/s, %d threads, %s kernels",
          loaded.name.c_str(), result.prompt_ids.size(), result.output_ids.size(),
          result.finish_reason.c_str(),
          t.prefill_seconds > 0 ? result.prompt_ids.size() / t.prefill_seconds : 0.0,
          decoded > 0 && t.decode_seconds > 0 ? decoded / t.decode_seconds : 0.0,
          threads.num_threads(), cpu::ActiveIsa());
    }
  }
  return absl::OkStatus();
}

}  // namespace

void AddGenerateCommand(CLI::App& app) {
  auto f = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "generate", "Generate text from a prompt on the CPU, streaming it to stdout");
  cmd->add_option("model,--model", f->model, "A .gguf file or a Hugging Face model directory")
      ->required()
      ->envname("BATON_MODEL");
  cmd->add_option("--prompt", f->prompt, "The prompt text")->required();
  cmd->add_flag("--chat", f->chat,
                "Send the prompt as a user message through the model's chat template");
  cmd->add_option("--system", f->system, "With --chat, a system message first");
  cmd->add_option("--chat-template", f->chat_template,
                  "With --chat, a Jinja chat template file, for models that ship none")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--no-special", f->no_special, "Do not add BOS/EOS to the prompt");
  cmd->add_option("--max-tokens", f->max_tokens, "Tokens to generate at most")
      ->envname("BATON_MAX_TOKENS");
  cmd->add_option("--temperature", f->temperature, "0 for greedy");
  cmd->add_option("--top-k", f->top_k, "Keep the k most likely tokens (0: off)");
  cmd->add_option("--top-p", f->top_p, "Nucleus sampling: keep the top tokens of this mass");
  cmd->add_option("--min-p", f->min_p, "Drop tokens below min_p times the top probability");
  cmd->add_option("--repetition-penalty", f->repetition_penalty,
                  "Divide the logits of tokens already seen (prompt and output); 1 is off");
  cmd->add_option("--presence-penalty", f->presence_penalty, "OpenAI presence penalty");
  cmd->add_option("--frequency-penalty", f->frequency_penalty, "OpenAI frequency penalty");
  cmd->add_option("--logit-bias", f->logit_bias, "ID=BIAS added to a token's logit (repeatable)");
  cmd->add_option("--seed", f->seed, "Random seed: the same seed gives the same tokens");
  cmd->add_option("--logprobs", f->logprobs,
                  "With --json, the logprob of each token and its N best alternatives");
  cmd->add_option("--stop", f->stop, "Stop before this text (repeatable)");
  cmd->add_option("--stop-ids", f->stop_ids, "Also stop on these token ids (comma-separated)");
  cmd->add_flag("--ignore-eos", f->ignore_eos, "Keep going past the end-of-sequence token");
  cmd->add_flag("--json", f->json,
                "Print one JSON object at the end (ids, text, finish reason, timings)");
  cmd->add_option("--logits-out", f->logits_out,
                  "Write the logits of every prompt position to this JSON file");
  cmd->add_option("--threads", f->threads, "Compute threads (0: one per core)")
      ->envname("BATON_THREADS");
  worker::AddDeviceFlags(cmd, &f->device);
  worker::AddKvCacheDtypeFlag(cmd, &f->kv_cache_dtype);
  cmd->add_option("--prefill-chunk", f->prefill_chunk, "Prompt tokens per forward pass")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-mmap", f->no_mmap,
                "Copy the weights into (huge-page) memory instead of mapping the file: faster "
                "decode, a copy's worth of RAM (llama.cpp's --no-mmap)");
  worker::AddQuantActivationsFlag(cmd, &f->quant_activations);
  cmd->add_flag("--quiet", f->quiet, "No progress or summary on stderr");
  cmd->callback([f] {
    absl::Status status = Run(*f);
    if (!status.ok()) {
      std::cerr << "baton generate: " << status.message() << "\n";
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace baton::tools
