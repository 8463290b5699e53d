#include "tools/synth_model_command.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/strings.h"
#include "kernels/cpu/quant_blocks.h"
#include "modelgen/synthetic_model.h"

namespace baton::tools {
namespace {

struct SynthFlags {
  std::string shape;
  std::string dtype = "bf16";
  uint64_t seed = 0;
  std::string out;
  std::string format = "both";
  bool quiet = false;
};

// Every type the engine computes with: f32, f16, bf16 and the block-quantized ones.
std::vector<std::string> DTypeNames() {
  std::vector<std::string> names;
  for (int i = 0; i <= static_cast<int>(cpu::DType::kQ6_K); ++i) {
    names.emplace_back(cpu::DTypeName(static_cast<cpu::DType>(i)));
  }
  return names;
}

absl::StatusOr<cpu::DType> ParseDType(const std::string& name) {
  for (int i = 0; i <= static_cast<int>(cpu::DType::kQ6_K); ++i) {
    if (name == cpu::DTypeName(static_cast<cpu::DType>(i))) return static_cast<cpu::DType>(i);
  }
  return absl::InvalidArgumentError(
      baton::StrCat("--dtype '", name, "' is not one of ", absl::StrJoin(DTypeNames(), ", ")));
}

absl::Status Run(const SynthFlags& flags) {
  modelgen::SyntheticModelSpec spec;
  BATON_ASSIGN_OR_RETURN(spec.config, modelgen::SyntheticShape(flags.shape));
  BATON_ASSIGN_OR_RETURN(spec.dtype, ParseDType(flags.dtype));
  spec.seed = flags.seed;
  spec.write_hf = flags.format == "hf" || flags.format == "both";
  spec.write_gguf = flags.format == "gguf" || flags.format == "both";
  if (cpu::IsBlockQuantized(spec.dtype) && flags.format != "gguf") {
    return absl::InvalidArgumentError(
        baton::StrCat("--dtype ", flags.dtype,
                      " exists only in GGUF (safetensors stays f32/f16/bf16); add --format gguf"));
  }
  // Progress on stderr, at most every half second, so a 5 GB write shows it is alive.
  auto last = std::chrono::steady_clock::now();
  bool printed = false;
  if (!flags.quiet) {
    spec.progress = [&](uint64_t done, uint64_t total) {
      const auto now = std::chrono::steady_clock::now();
      if (done < total && now - last < std::chrono::milliseconds(500)) return;
      last = now;
      printed = true;
      std::fprintf(stderr, "\rbaton synth-model: %.1f / %.1f MiB (%3.0f%%)",
                   static_cast<double>(done) / (1 << 20), static_cast<double>(total) / (1 << 20),
                   total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0);
    };
  }
  absl::Status status = modelgen::WriteSyntheticModel(spec, flags.out);
  if (printed) std::fprintf(stderr, "\n");
  if (status.ok() && !flags.quiet) {
    std::cerr << "baton synth-model: wrote " << flags.shape << " (" << flags.dtype << ", seed "
              << flags.seed << ") to " << flags.out << "\n";
  }
  return status;
}

}  // namespace

void AddSynthModelCommand(CLI::App& app) {
  auto flags = std::make_shared<SynthFlags>();
  CLI::App* cmd = app.add_subcommand(
      "synth-model",
      "Write a model of a real shape with random weights (deterministic from --seed): a "
      "Hugging Face directory (config.json, model.safetensors, tokenizer.json, ...) and/or "
      "model.gguf with the same weights");
  cmd->add_option(
         "--shape", flags->shape,
         baton::StrCat("Model shape: ", absl::StrJoin(modelgen::SyntheticShapeNames(), ", ")))
      ->required();
  cmd->add_option("--dtype", flags->dtype,
                  baton::StrCat("Weight type: ", absl::StrJoin(DTypeNames(), ", "),
                                " (the block-quantized ones GGUF only, random valid blocks)"))
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Random seed; the same seed writes the same bytes")
      ->capture_default_str();
  cmd->add_option("--out", flags->out, "Directory to write (created if absent)")->required();
  cmd->add_option("--format", flags->format, "hf, gguf, or both")
      ->check(CLI::IsMember({"hf", "gguf", "both"}))
      ->capture_default_str();
  cmd->add_flag("--quiet", flags->quiet, "No progress on stderr");
  cmd->callback([flags] {
    absl::Status status = Run(*flags);
    if (!status.ok()) {
      std::cerr << "baton synth-model: " << status.message() << "\n";
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace baton::tools
