// The Communicator's cost against the library under it: all-reduce (sum, f32) on 2 ranks
// in 2 processes, Baton's gloo Communicator against gloo::allreduce called directly on a
// context of its own, alternating in one run (docs/perf/parallel.md).
//
//   build/release/bin/collectives_bench                        # 4 KiB .. 64 MiB
//   build/release/bin/collectives_bench --sizes 4096 --rounds 9
//
// Each round times `iters` calls of each path back to back, alternating which goes first;
// a size reports the median time per call of each path over the rounds, and their ratio
// (goal: ours within 5 % of gloo's). Rank 1 is this binary started again (--role rank1).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/child_process.h"
#include "common/strings.h"
#include "gloo/allreduce.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"
#include "parallel/gloo_communicator.h"

namespace baton::bench {
namespace {

struct Flags {
  std::string role = "rank0";
  std::string store;
  std::vector<int64_t> sizes = {4096, 65536, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  int rounds = 7;
  int64_t budget_bytes = int64_t{256} << 20;  // per path per round, to size `iters`
  int ready_fd = -1;
};

int Iters(const Flags& f, int64_t bytes) {
  return static_cast<int>(std::clamp<int64_t>(f.budget_bytes / bytes, 3, 400));
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Run(const Flags& f, int rank) {
  parallel::FileStore store(f.store);
  parallel::GlooOptions o;
  o.rank = rank;
  o.size = 2;
  o.store = &store;
  o.prefix = "baton";
  auto ours = parallel::ConnectGloo(o);
  if (!ours.ok()) {
    std::fprintf(stderr, "collectives_bench rank %d: %s\n", rank,
                 std::string(ours.status().message()).c_str());
    return 1;
  }
  // The direct path: gloo's own rendezvous and context, as a gloo user writes it.
  gloo::rendezvous::FileStore gstore(f.store);
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, 2);
  ctx->connectFullMesh(gstore, device);

  if (rank == 0) {
    std::printf(
        "# collectives_bench: all-reduce sum f32, 2 ranks in 2 processes, gloo tcp on loopback\n");
    std::printf("%10s %6s %12s %12s %8s %12s\n", "bytes", "iters", "baton_us", "gloo_us", "ratio",
                "baton_GB/s");
  }
  for (int64_t bytes : f.sizes) {
    const int64_t n = bytes / 4;
    std::vector<float> a(n, 1.0f), b(n, 1.0f);
    const int iters = Iters(f, bytes);
    std::vector<double> t_ours, t_direct;
    for (int round = 0; round < f.rounds; ++round) {
      for (int which = 0; which < 2; ++which) {
        const bool run_ours = (which == 0) == (round % 2 == 0);
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) {
          if (run_ours) {
            std::fill_n(a.data(), 1, 1.0f);
            absl::Status s = (*ours)->AllReduceSum(std::span<float>(a));
            if (!s.ok()) {
              std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
              return 1;
            }
          } else {
            std::fill_n(b.data(), 1, 1.0f);
            gloo::AllreduceOptions opts(ctx);
            opts.setOutput(b.data(), b.size());
            opts.setReduceFunction(
                static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
            gloo::allreduce(opts);
          }
        }
        const double us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                .count() /
            iters;
        (run_ours ? t_ours : t_direct).push_back(us);
      }
    }
    if (rank == 0) {
      const double mo = Median(t_ours), md = Median(t_direct);
      std::printf("%10lld %6d %12.1f %12.1f %8.3f %12.2f\n", static_cast<long long>(bytes), iters,
                  mo, md, mo / md, static_cast<double>(bytes) / mo / 1e3);
      std::fflush(stdout);
    }
  }
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"Baton's gloo Communicator against gloo called directly (all-reduce, 2 ranks)",
               "collectives_bench"};
  Flags f;
  app.add_option("--sizes", f.sizes, "Message sizes in bytes");
  app.add_option("--rounds", f.rounds, "Alternating rounds per size (the median is reported)");
  app.add_option("--budget-bytes", f.budget_bytes, "Bytes each path moves per round");
  app.add_option("--role", f.role)->group("");
  app.add_option("--store", f.store)->group("");
  app.add_option("--ready-fd", f.ready_fd)->group("");
  CLI11_PARSE(app, argc, argv);
  if (f.role == "rank1") {
    (void)!write(f.ready_fd, "up\n", 3);
    close(f.ready_fd);
    return Run(f, 1);
  }
  char tmpl[] = "/tmp/baton-collectives-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  f.store = tmpl;
  std::vector<std::string> args = {
      "--role",   "rank1",          "--store",        f.store,
      "--rounds", StrCat(f.rounds), "--budget-bytes", StrCat(f.budget_bytes)};
  for (int64_t s : f.sizes) args.insert(args.end(), {"--sizes", StrCat(s)});
  auto child = ChildProcess::Spawn("rank 1", args);
  if (!child.ok()) {
    std::fprintf(stderr, "%s\n", std::string(child.status().message()).c_str());
    return 1;
  }
  const int rc = Run(f, 0);
  (*child)->Stop(absl::Seconds(10));
  std::filesystem::remove_all(f.store);
  return rc;
}

}  // namespace
}  // namespace baton::bench

int main(int argc, char** argv) { return baton::bench::Main(argc, argv); }
