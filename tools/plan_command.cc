#include "tools/plan_command.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "capacity/capacity_plan.h"
#include "capacity/gpu_devices.h"
#include "capacity/plan_json.h"
#include "common/status.h"
#include "common/strings.h"
#include "kernels/cpu/matmul.h"
#include "model/model.h"
#include "model/weight_inventory.h"
#include "nlohmann/json.hpp"
#include "tools/plan_device.h"

namespace baton::tools {
namespace {

using capacity::CapacityPlan;
using capacity::DeviceSpec;
using capacity::PlanRequest;

constexpr double kGB = 1e9;

struct PlanFlags {
  std::string model;
  std::string device = "h200";
  int tp = 1;
  std::string kv_dtype = "bf16";
  int64_t max_model_len = 0;
  int64_t prompt_len = 0;
  double gpu_memory_utilization = 0.9;
  double memory_gb = 0, bandwidth_gbs = 0, tflops = 0;
  int threads = 0;
  bool json = false;
};

constexpr int64_t kDefaultPromptLen = 512;

nlohmann::json ToJson(const PlanFlags& flags, const model::Model& m, const DeviceSpec& device,
                      const std::optional<CpuMeasurement>& cpu, const PlanRequest& req,
                      const CapacityPlan& p) {
  nlohmann::json j = capacity::PlanJson(device, req, p);
  j["model"] = {{"name", m.config().name},
                {"path", m.path()},
                {"format", m.format()},
                {"weight_dtype", cpu::DTypeName(m.weights().layers[0].q.weight.dtype)}};
  j["model"].update(capacity::ShapeJson(model::ShapeOf(m.config())));
  j["device"]["measured"] = cpu.has_value();
  if (cpu) {
    j["device"]["cpu"] = {{"model_name", cpu->model_name},
                          {"isa", cpu->isa},
                          {"threads", cpu->threads},
                          {"read_gbs", cpu->read_gbs},
                          {"peak_read_gbs", cpu->peak_read_gbs},
                          {"gemm_gflops", cpu->gemm_gflops},
                          {"probe_seconds", cpu->seconds}};
  }
  j["kv_dtype"] = flags.kv_dtype;
  return j;
}

std::string Bytes(double b) {
  char buf[32];
  if (b >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  } else if (b >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2f MB", b / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  }
  return buf;
}

std::string Seconds(double s) {
  char buf[32];
  if (s >= 1) {
    std::snprintf(buf, sizeof buf, "%.2f s", s);
  } else if (s >= 1e-3) {
    std::snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  }
  return buf;
}

void PrintTable(const PlanFlags& flags, const model::Model& m, const DeviceSpec& device,
                const std::optional<CpuMeasurement>& cpu, const PlanRequest& req,
                const CapacityPlan& p) {
  const model::ModelConfig& c = m.config();
  const double tp = p.tp;
  std::printf(
      "model   %s (%s, %s weights): %lld layers, %lld heads, %lld KV heads, head_dim %lld, "
      "hidden %lld, intermediate %lld, vocab %lld, context %lld\n",
      c.name.c_str(), m.format().c_str(), cpu::DTypeName(m.weights().layers[0].q.weight.dtype),
      static_cast<long long>(c.num_layers), static_cast<long long>(c.num_heads),
      static_cast<long long>(c.num_kv_heads), static_cast<long long>(c.head_dim),
      static_cast<long long>(c.hidden_size), static_cast<long long>(c.intermediate_size),
      static_cast<long long>(c.vocab_size), static_cast<long long>(c.max_position_embeddings));
  std::printf("device  %s x %d (tp): per rank %s memory (%.2f usable), %.0f GB/s, %.1f TFLOP/s\n",
              device.name.c_str(), p.tp, Bytes(device.memory_bytes).c_str(), req.memory_utilization,
              device.bandwidth_bytes_s / kGB, device.flops / 1e12);
  if (cpu) {
    std::printf(
        "        measured: %s (%s), %d threads: read %.1f GB/s (best window %.1f), "
        "bf16 GEMM %.0f GFLOP/s, MemAvailable %s (probes took %.1f s)\n",
        cpu->model_name.c_str(), cpu->isa.c_str(), cpu->threads, cpu->read_gbs, cpu->peak_read_gbs,
        cpu->gemm_gflops, Bytes(cpu->mem_available_bytes).c_str(), cpu->seconds);
    if (p.tp > 1)
      std::printf("        the %d ranks share this machine: each gets 1/%d\n", p.tp, p.tp);
  }
  std::printf(
      "KV cache %s, %.0f byte(s) per element; %lld of %lld query heads and %lld of %lld "
      "KV heads per rank\n\n",
      flags.kv_dtype.c_str(), req.kv_element_bytes, static_cast<long long>(p.heads_per_rank),
      static_cast<long long>(c.num_heads), static_cast<long long>(p.kv_heads_per_rank),
      static_cast<long long>(c.num_kv_heads));
  std::printf("%-50s %14s %14s\n", "", "per rank", "total");
  auto row = [](const char* name, double rank, double total) {
    std::printf("%-50s %14s %14s\n", name, Bytes(rank).c_str(), Bytes(total).c_str());
  };
  row("weights", p.weight_bytes_rank, p.weight_bytes_total);
  row("KV cache per token", p.kv_bytes_per_token_rank, p.kv_bytes_per_token_total);
  row("usable memory", p.usable_bytes_rank, p.usable_bytes_rank * tp);
  row("KV cache", p.kv_cache_bytes_rank, p.kv_cache_bytes_rank * tp);
  std::printf("\n%-50s %lld\n", "tokens that fit", static_cast<long long>(p.tokens_fit));
  std::printf("%-50s %lld\n",
              StrCat("conversations of ", req.max_model_len, " tokens (--max-model-len)").c_str(),
              static_cast<long long>(p.conversations_fit));
  std::printf("%-50s %s per token (%.1f tokens/s), %s read per rank\n",
              StrCat("decode floor, batch 1, context ", req.prompt_len).c_str(),
              Seconds(p.decode_floor_seconds).c_str(), 1.0 / p.decode_floor_seconds,
              Bytes(p.decode_step_bytes_rank).c_str());
  std::printf("%-50s %s (%s-bound, %.3g TFLOP per rank)\n",
              StrCat("prefill of ", req.prompt_len, " tokens (--prompt-len)").c_str(),
              Seconds(p.prefill_seconds).c_str(), p.prefill_compute_bound ? "compute" : "memory",
              p.prefill_flops_rank / 1e12);
  const std::string label = StrCat("decode compute-bound past batch, context ", req.prompt_len);
  if (p.compute_bound_batch) {
    std::printf("%-50s %.0f (the KV cache holds %lld such sequences)\n", label.c_str(),
                *p.compute_bound_batch, static_cast<long long>(p.memory_batch_limit));
  } else {
    std::printf("%-50s never: the KV reads alone keep it memory-bound\n", label.c_str());
  }
}

absl::Status Run(const PlanFlags& flags) {
  model::OpenOptions options;
  options.prefault = false;  // map only: the planner reads shapes and types, not weights
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<model::Model> m, model::Model::Open(flags.model, options));
  const model::ModelConfig& c = m->config();

  std::optional<CpuMeasurement> cpu;
  DeviceSpec device;
  if (flags.device == "cpu") {
    BATON_ASSIGN_OR_RETURN(cpu, MeasureCpu(flags.threads));
    device = CpuDevice(*cpu);
  } else {
    BATON_ASSIGN_OR_RETURN(device, capacity::GpuDevice(flags.device));
  }
  if (flags.memory_gb > 0) device.memory_bytes = flags.memory_gb * kGB;
  if (flags.bandwidth_gbs > 0) device.bandwidth_bytes_s = flags.bandwidth_gbs * kGB;
  if (flags.tflops > 0) device.flops = flags.tflops * 1e12;
  if (cpu && flags.tp > 1) {
    // Every rank runs on this one machine: they share its memory, bandwidth and cores.
    device.memory_bytes /= flags.tp;
    device.bandwidth_bytes_s /= flags.tp;
    device.flops /= flags.tp;
  }

  PlanRequest req;
  req.tp = flags.tp;
  BATON_ASSIGN_OR_RETURN(req.kv_element_bytes, capacity::KvElementBytes(flags.kv_dtype));
  req.memory_utilization = flags.gpu_memory_utilization;
  req.max_model_len = flags.max_model_len > 0 ? flags.max_model_len : c.max_position_embeddings;
  req.prompt_len =
      flags.prompt_len > 0 ? flags.prompt_len : std::min(kDefaultPromptLen, req.max_model_len);
  BATON_ASSIGN_OR_RETURN(
      CapacityPlan plan,
      capacity::PlanCapacity(model::ShapeOf(c), m->weight_inventory(), device, req));
  if (flags.json) {
    std::cout << ToJson(flags, *m, device, cpu, req, plan).dump(2) << "\n";
  } else {
    PrintTable(flags, *m, device, cpu, req, plan);
  }
  return absl::OkStatus();
}

}  // namespace

void AddPlanCommand(CLI::App& app) {
  auto f = std::make_shared<PlanFlags>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Capacity of a model on a device, from its config and tensor sizes: KV bytes per token, "
      "weights per rank, tokens and conversations that fit, the decode floor, a prefill "
      "estimate, the batch where decode turns compute-bound (docs/operations.md)");
  cmd->add_option("model,--model", f->model, "A .gguf file or a Hugging Face model directory")
      ->required();
  cmd->add_option("--device", f->device,
                  "h200, h100, a100 (datasheet figures), or cpu (this machine, measured)")
      ->check(CLI::IsMember({"h200", "h100", "a100", "cpu"}))
      ->capture_default_str();
  cmd->add_option("--tp,--tensor-parallel-size", f->tp,
                  "Tensor-parallel ranks (devices); must divide the attention heads and divide "
                  "or be a multiple of the KV heads")
      ->capture_default_str();
  cmd->add_option("--kv-dtype", f->kv_dtype, "KV cache element type: bf16, f16, f32, fp8")
      ->capture_default_str();
  cmd->add_option("--max-model-len", f->max_model_len,
                  "Tokens in one conversation (0: the model's context length)")
      ->capture_default_str();
  cmd->add_option("--prompt-len", f->prompt_len,
                  "Prompt of the prefill estimate, and the context of the decode figures (0: 512, "
                  "or --max-model-len when shorter)")
      ->capture_default_str();
  cmd->add_option("--gpu-memory-utilization", f->gpu_memory_utilization,
                  "Fraction of the device's memory for weights and KV cache, as vLLM's")
      ->capture_default_str();
  cmd->add_option("--memory-gb", f->memory_gb, "Override the memory per device, in GB (0: keep)")
      ->capture_default_str();
  cmd->add_option("--bandwidth-gbs", f->bandwidth_gbs,
                  "Override the memory bandwidth per device, in GB/s (0: keep)")
      ->capture_default_str();
  cmd->add_option("--tflops", f->tflops, "Override the dense 16-bit TFLOP/s per device (0: keep)")
      ->capture_default_str();
  cmd->add_option("--threads", f->threads,
                  "--device cpu: threads of the probes (0: one per core, as the engine)")
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "Print the figures as JSON (the same fields)");
  cmd->callback([f] {
    absl::Status status = Run(*f);
    if (!status.ok()) {
      std::cerr << "baton plan: " << status.message() << "\n";
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace baton::tools
