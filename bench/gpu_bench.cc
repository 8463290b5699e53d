// The GPU backend's speed on one device against the device's own limits, measured in the
// same run (docs/perf/gpu.md):
//   copy     device-to-device copy bandwidth, bytes read plus written per second: the
//            bound a decode step's reads are held to.
//   decode   batch 1 on an 8B-shaped bf16 model: bytes a step must read (every weight
//            matrix but the embedding, plus the KV cache so far) over its time, against
//            the copy bandwidth; with and without CUDA graphs, in alternating rounds.
//   prefill  one prompt of --prefill-tokens: tokens/s, and the GEMM share: the step's
//            GEMMs (the same cuBLASLt calls through the same GpuOps) timed alone, over
//            the step's time.
//   serve    the engine with N concurrent requests of --serve-input / --serve-output
//            tokens each: output tokens/s (the engine, without the HTTP front door).
// The weights are one constant (the bench measures time, not text), so the model needs
// no file: every matrix points into one host buffer, uploaded matrix by matrix.
//
//   gpu_bench --shape llama3.1-8b --serve 64,256
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/status.h"
#include "engine/engine.h"
#include "engine/gpu_backend.h"
#include "engine/model_runner.h"
#include "kernels/cuda/cuda_gpu_ops.h"
#include "model/arch/llama_gpu.h"
#include "model/float_convert.h"
#include "modelgen/synthetic_model.h"
#include "tests/fakes/host_gpu_ops.h"

namespace baton {
namespace {

using Clock = std::chrono::steady_clock;
using kernels::Bf16Bits;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void Check(const absl::Status& status, const char* what) {
  if (status.ok()) return;
  std::fprintf(stderr, "gpu_bench: %s: %s\n", what, std::string(status.message()).c_str());
  std::exit(1);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// A model of `config`'s shape whose every matrix is the bf16 constant 0.01, read from one
// host buffer as large as the largest matrix.
class ConstantModel : public model::Model {
 public:
  explicit ConstantModel(const model::ModelConfig& c) {
    config_ = c;
    const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
    const int64_t largest = std::max(
        {c.vocab_size * c.hidden_size, c.intermediate_size * c.hidden_size, q * c.hidden_size});
    data_.assign(static_cast<size_t>(largest), model::F32ToBf16(0.01f));
    auto m = [&](int64_t rows, int64_t cols) {
      return cpu::MatrixRef{cpu::DType::kBF16, data_.data(), rows, cols};
    };
    weights_.embedding = m(c.vocab_size, c.hidden_size);
    weights_.lm_head = m(c.vocab_size, c.hidden_size);
    weights_.final_norm.assign(c.hidden_size, 1.0f);
    weights_.layers.resize(c.num_layers);
    for (model::LayerWeights& l : weights_.layers) {
      l.attn_norm.assign(c.hidden_size, 1.0f);
      l.mlp_norm.assign(c.hidden_size, 1.0f);
      l.q.weight = m(q, c.hidden_size);
      l.k.weight = m(kv, c.hidden_size);
      l.v.weight = m(kv, c.hidden_size);
      l.o.weight = m(c.hidden_size, q);
      l.gate.weight = m(c.intermediate_size, c.hidden_size);
      l.up.weight = m(c.intermediate_size, c.hidden_size);
      l.down.weight = m(c.hidden_size, c.intermediate_size);
    }
    path_ = "constant:" + c.name;
    format_ = "constant";
  }

  // Bytes a decode step reads from the weights: every matrix but the embedding (one row).
  uint64_t DecodeWeightBytes() const {
    const model::ModelConfig& c = config_;
    const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
    const int64_t per_layer =
        (q + 2 * kv) * c.hidden_size + c.hidden_size * q + 3 * c.intermediate_size * c.hidden_size;
    return 2 * static_cast<uint64_t>(per_layer * c.num_layers + c.vocab_size * c.hidden_size);
  }

 private:
  std::vector<Bf16Bits> data_;
};

struct Flags {
  std::string shape = "llama3.1-8b";
  int device = 0;
  bool batch_invariant = false;
  int decode_context = 512;
  int decode_steps = 32;
  int rounds = 3;
  int prefill_tokens = 2048;
  std::vector<int> serve;
  int serve_input = 1000;
  int serve_output = 1000;
  bool emulate = false;
};

// Device-to-device copies of `bytes`: the best of `reps` in bytes moved (read + written)
// per second.
double CopyBandwidth(kernels::GpuOps* ops, int64_t bytes, int reps) {
  auto a = kernels::GpuBuffer::Allocate(ops, bytes);
  auto b = kernels::GpuBuffer::Allocate(ops, bytes);
  Check(a.status(), "copy buffers");
  Check(b.status(), "copy buffers");
  Check(ops->Memset(a->get(), 1, bytes), "memset");
  Check(ops->CopyOnDevice(b->get(), a->get(), bytes), "warm-up copy");
  Check(ops->Synchronize(), "sync");
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t = Clock::now();
    Check(ops->CopyOnDevice(b->get(), a->get(), bytes), "copy");
    Check(ops->Synchronize(), "sync");
    best = std::max(best, 2.0 * static_cast<double>(bytes) / Since(t));
  }
  return best;
}

// `tokens` positions of bf16 pages in device memory, as the engine's pool makes them.
struct Kv {
  kernels::GpuBuffer memory;
  std::unique_ptr<kvcache::KvPool> pool;
};

Kv MakeKv(kernels::GpuOps* ops, const model::ModelConfig& c, int64_t tokens) {
  Kv kv;
  const kvcache::PageLayout layout = engine::PageLayoutFor(c, 16, "bf16");
  const int64_t pages = (tokens + 15) / 16 + 1;
  auto memory = kernels::GpuBuffer::Allocate(ops, pages * layout.page_bytes());
  Check(memory.status(), "KV pages");
  kv.memory = std::move(*memory);
  auto pool = kvcache::KvPool::Create(layout, pages, kv.memory.get());
  Check(pool.status(), "KV pool");
  kv.pool = std::move(*pool);
  return kv;
}

void RunForward(model::LlamaGpuForward* f, const std::vector<int32_t>& tokens, int64_t start,
                const std::vector<int32_t>& blocks) {
  model::ForwardOutput out;
  const model::SequenceInput seq{tokens, start, blocks, model::LogitsWanted::kLast};
  Check(f->Forward(std::span(&seq, 1), &out), "forward");
}

void Decode(model::LlamaGpuForward* f, const ConstantModel& m, const Flags& flags, double copy_bw) {
  const model::ModelConfig& c = m.config();
  const int64_t total = flags.decode_context + 2 * flags.rounds * (flags.decode_steps + 1);
  const int64_t kv_bytes_per_token = 2 * 2 * c.num_layers * c.num_kv_heads * c.head_dim;
  std::vector<int32_t> blocks((total + 15) / 16);
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(i);
  std::vector<int32_t> prompt(flags.decode_context, 7);
  RunForward(f, prompt, 0, blocks);
  int64_t pos = flags.decode_context;
  std::vector<double> ratio[2], step[2];
  for (int round = 0; round < flags.rounds; ++round) {
    for (int graphs = 1; graphs >= 0; --graphs) {
      f->set_use_graphs(graphs == 1);
      const std::vector<int32_t> one = {11};
      RunForward(f, one, pos++, blocks);  // warm-up: the graph's capture
      for (int s = 0; s < flags.decode_steps; ++s) {
        const auto t = Clock::now();
        RunForward(f, one, pos, blocks);
        const double secs = Since(t);
        const double bytes = static_cast<double>(m.DecodeWeightBytes()) +
                             static_cast<double>(kv_bytes_per_token) * static_cast<double>(pos + 1);
        step[graphs].push_back(secs);
        ratio[graphs].push_back(bytes / secs / copy_bw);
        ++pos;
      }
    }
  }
  f->set_use_graphs(true);
  std::printf(
      "decode batch 1 at context %d-%lld: step %.3f ms with graphs, %.3f ms without "
      "(%.2fx); bytes/step over step time %.1f%% of the copy bandwidth with graphs, "
      "%.1f%% without (goal 85%%)\n",
      flags.decode_context, static_cast<long long>(pos), Median(step[1]) * 1e3,
      Median(step[0]) * 1e3, Median(step[0]) / Median(step[1]), Median(ratio[1]) * 100,
      Median(ratio[0]) * 100);
  std::printf("RESULT decode_graphs_ms=%.4f decode_eager_ms=%.4f decode_bw_share=%.4f\n",
              Median(step[1]) * 1e3, Median(step[0]) * 1e3, Median(ratio[1]));
}

void Prefill(model::LlamaGpuForward* f, kernels::GpuOps* ops, const ConstantModel& m,
             const Flags& flags) {
  const model::ModelConfig& c = m.config();
  const int n = flags.prefill_tokens;
  std::vector<int32_t> blocks((n + 15) / 16);
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(i);
  std::vector<int32_t> prompt(n);
  std::mt19937 rng(1);
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % c.vocab_size);
  RunForward(f, prompt, 0, blocks);  // warm-up: plans
  std::vector<double> times;
  for (int r = 0; r < flags.rounds; ++r) {
    const auto t = Clock::now();
    RunForward(f, prompt, 0, blocks);
    times.push_back(Since(t));
  }
  // The step's GEMMs alone, on scratch of the same shapes.
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t inter = c.intermediate_size, hidden = c.hidden_size;
  const int64_t widest = std::max({q + 2 * kv, 2 * inter, hidden});
  auto x = kernels::GpuBuffer::Allocate(ops, int64_t{n} * std::max(inter, hidden) * 2);
  auto w = kernels::GpuBuffer::Allocate(ops, widest * std::max(inter, hidden) * 2);
  auto y = kernels::GpuBuffer::Allocate(ops, int64_t{n} * widest * 4);
  Check(x.status(), "probe");
  Check(w.status(), "probe");
  Check(y.status(), "probe");
  Check(ops->Memset(x->get(), 0, x->bytes()), "probe");
  Check(ops->Memset(w->get(), 0, w->bytes()), "probe");
  struct Shape {
    int64_t n, k;
  };
  const Shape layer[] = {{q + 2 * kv, hidden}, {hidden, q}, {2 * inter, hidden}, {hidden, inter}};
  auto gemms = [&] {
    for (int64_t l = 0; l < c.num_layers; ++l) {
      for (const Shape& s : layer) {
        Check(ops->Linear(x->as<Bf16Bits>(), w->as<Bf16Bits>(), nullptr, n, static_cast<int>(s.n),
                          static_cast<int>(s.k), y->as<float>()),
              "probe GEMM");
      }
    }
    Check(ops->Synchronize(), "sync");
  };
  gemms();
  std::vector<double> probe;
  for (int r = 0; r < flags.rounds; ++r) {
    const auto t = Clock::now();
    gemms();
    probe.push_back(Since(t));
  }
  const double step = Median(times), gemm = Median(probe);
  std::printf(
      "prefill %d tokens: %.1f ms, %.0f tokens/s; its GEMMs alone %.1f ms: GEMM share "
      "%.1f%% (goal 60%%)\n",
      n, step * 1e3, n / step, gemm * 1e3, gemm / step * 100);
  std::printf("RESULT prefill_ms=%.3f prefill_tokens_per_s=%.1f gemm_share=%.4f\n", step * 1e3,
              n / step, gemm / step);
}

void Serve(std::unique_ptr<ConstantModel> model, std::unique_ptr<kernels::GpuOps> ops,
           const Flags& flags) {
  engine::LoadedModel loaded;
  loaded.name = "constant";
  const model::ModelConfig config = model->config();
  loaded.model = std::move(model);
  engine::EngineOptions eo;
  eo.max_batched_tokens = 8192;
  eo.max_prefill_chunk = 2048;
  eo.max_running = *std::max_element(flags.serve.begin(), flags.serve.end());
  eo.threads = 4;
  engine::GpuEngineOptions go;
  auto gpu = engine::GpuEngine::Create(*loaded.model, std::move(ops), eo, go);
  Check(gpu.status(), "GPU engine");
  Check((*gpu)->Configure(&eo), "GPU engine KV");
  std::printf("serve: %.1f GiB of KV pages\n", static_cast<double>((*gpu)->kv_bytes()) / (1 << 30));
  auto engine = engine::Engine::Create(&loaded, eo);
  Check(engine.status(), "engine");
  std::mt19937 rng(5);
  for (int concurrency : flags.serve) {
    std::vector<std::shared_ptr<engine::RequestStream>> streams;
    const auto t = Clock::now();
    for (int i = 0; i < concurrency; ++i) {
      engine::EngineRequest r;
      r.detokenize = false;
      for (int k = 0; k < flags.serve_input; ++k) {
        r.prompt_ids.push_back(static_cast<int32_t>(rng() % config.vocab_size));
      }
      r.params.max_tokens = flags.serve_output;
      r.params.ignore_eos = true;
      r.params.temperature = 0;
      auto s = (*engine)->Submit(std::move(r));
      Check(s.status(), "submit");
      streams.push_back(*s);
    }
    int64_t tokens = 0;
    double first_token = 0;
    for (auto& s : streams) {
      engine::TokenEvent e;
      while (s->Next(&e)) {
        tokens += static_cast<int64_t>(e.token_ids.size());
        if (tokens == 1) first_token = Since(t);
        if (e.finished) Check(e.status, "request");
      }
    }
    const double secs = Since(t);
    std::printf(
        "serve %d concurrent x %d in / %d out: %.0f output tokens/s (%lld tokens in "
        "%.1f s; first token after %.2f s)\n",
        concurrency, flags.serve_input, flags.serve_output, tokens / secs,
        static_cast<long long>(tokens), secs, first_token);
    std::printf("RESULT serve_%d_tokens_per_s=%.1f\n", concurrency, tokens / secs);
  }
}

int Main(int argc, char** argv) {
  CLI::App app{
      "The GPU backend's decode, prefill and serving speed against the device's own "
      "limits (docs/perf/gpu.md)"};
  Flags flags;
  app.add_option("--shape", flags.shape, "synthetic model shape (baton synth-model --help)");
  app.add_option("--device-id", flags.device, "the GPU");
  app.add_flag("--batch-invariant", flags.batch_invariant, "GEMMs that never split k");
  app.add_option("--decode-context", flags.decode_context, "decode starts after this prompt");
  app.add_option("--decode-steps", flags.decode_steps, "timed decode steps per round and mode");
  app.add_option("--rounds", flags.rounds, "rounds of each measurement");
  app.add_option("--prefill-tokens", flags.prefill_tokens, "the prefill prompt's length");
  app.add_option("--serve", flags.serve, "concurrencies of the serving run (none: skip it)")
      ->delimiter(',');
  app.add_option("--serve-input", flags.serve_input, "prompt tokens per request");
  app.add_option("--serve-output", flags.serve_output, "output tokens per request");
  app.add_flag("--emulate", flags.emulate,
               "run on the host emulation of the kernels: a smoke test of the bench itself "
               "(use a small --shape; the figures mean nothing)");
  CLI11_PARSE(app, argc, argv);

  int count = 0;
  if (!flags.emulate && (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)) {
    std::printf("gpu_bench: no CUDA device; nothing measured\n");
    return 0;
  }
  auto config = modelgen::SyntheticShape(flags.shape);
  Check(config.status(), "--shape");
  auto model = std::make_unique<ConstantModel>(*config);
  absl::StatusOr<std::unique_ptr<kernels::GpuOps>> ops;
  if (flags.emulate) {
    auto host = std::make_unique<fakes::HostGpuOps>();
    host->set_memory_bytes(int64_t{256} << 20);
    ops = std::unique_ptr<kernels::GpuOps>(std::move(host));
  } else {
    auto cuda = kernels::cuda::CudaGpuOps::Create(flags.device, flags.batch_invariant);
    Check(cuda.status(), "device");
    ops = std::unique_ptr<kernels::GpuOps>(*std::move(cuda));
  }
  std::printf("gpu_bench: %s, %s, batch-invariant %s\n", (*ops)->name(), flags.shape.c_str(),
              flags.batch_invariant ? "on" : "off");
  const double copy_bw = CopyBandwidth(ops->get(), flags.emulate ? 1 << 20 : int64_t{1} << 30, 10);
  std::printf("copy: %.0f GB/s device to device (read + written)\n", copy_bw / 1e9);
  std::printf("RESULT copy_gb_per_s=%.1f\n", copy_bw / 1e9);
  {
    model::LlamaGpuOptions fo;
    fo.max_tokens = std::max(2048, flags.prefill_tokens);
    fo.max_seqs = 256;
    const auto t = Clock::now();
    auto whole = model::PlanShard(*config, model::RankPlacement{});
    Check(whole.status(), "shard");
    auto f = model::LlamaGpuForward::Create(*model, *whole, ops->get(), nullptr, fo);
    Check(f.status(), "forward");
    std::printf("weights: %.2f GB uploaded in %.1f s\n",
                static_cast<double>((*f)->weights().bytes) / 1e9, Since(t));
    const int64_t decode_positions =
        flags.decode_context + 2 * flags.rounds * (flags.decode_steps + 1);
    Kv kv = MakeKv(ops->get(), *config, std::max<int64_t>(flags.prefill_tokens, decode_positions));
    Check((*f)->BindKv(engine::KvPagesOf(kv.pool.get())), "KV");
    Decode(f->get(), *model, flags, copy_bw);
    Prefill(f->get(), ops->get(), *model, flags);
  }
  if (!flags.serve.empty()) Serve(std::move(model), *std::move(ops), flags);
  return 0;
}

}  // namespace
}  // namespace baton

int main(int argc, char** argv) { return baton::Main(argc, argv); }
