// KV transfer throughput: a prompt's pages written layer by layer into another process's
// registered page pool with UCX RMA puts (transport/), against ucx_perftest's ucp_put_bw on
// the same transport and message size, run in the same invocation (docs/perf/transport.md).
//
// Shape: the 1B-shaped model (Llama 3.2 1B: 16 layers, 8 KV heads, head_dim 64), f32 KV as
// the CPU engine stores it, 16-token pages. One put carries one layer's K and V of one
// page (64 KiB), in the order a layer-wise push sends them: layer 0 of every page, then
// layer 1, ... A 4096-token prompt is 256 pages, 256 MiB.
//
// The receiver's pool is allocated as a decode worker's is (--pool auto): by UCX when the
// transports include shared memory, so that puts land directly; else by the process and
// registered. `--pool own` registers the process's memory everywhere, as before.
//
// The receiver is this binary in `--receiver` mode, a separate process. After each round it
// hashes its pool (XXH3) and the sender compares: a transfer that loses or misplaces a byte
// fails the run.

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "tests/unit/transport/ucx_test_util.h"
#include "transport/registered_region.h"
#include "transport/ucx_endpoint.h"
#include "transport/ucx_worker.h"
#include "xxhash.h"

namespace baton::bench {
namespace {

using baton::testing::ChildProcess;
using transport::RegisteredRegion;
using transport::RemoteRegion;
using transport::UcxEndpoint;
using transport::UcxWorker;
using Clock = std::chrono::steady_clock;

struct Shape {
  int64_t layers = 16, kv_heads = 8, head_dim = 64, block_size = 16, tokens = 4096;
  int64_t chunk_bytes() const { return 2 * block_size * kv_heads * head_dim * 4; }  // K+V, f32
  int64_t page_bytes() const { return layers * chunk_bytes(); }
  int64_t pages() const { return (tokens + block_size - 1) / block_size; }
  int64_t bytes() const { return pages() * page_bytes(); }
};

int Receiver(const std::string& transports, const std::string& pool_mode, int64_t bytes) {
  auto ucx = UcxWorker::Create({.transports = transports});
  if (!ucx.ok()) {
    std::cerr << ucx.status() << "\n";
    return 1;
  }
  std::vector<uint8_t> own;
  const bool from_ucx = pool_mode == "ucx" ||
                        (pool_mode == "auto" && baton::transport::MayUseSharedMemory(transports));
  auto region = from_ucx
                    ? RegisteredRegion::Allocate(**ucx, bytes)
                    : (own.assign(bytes, 0), RegisteredRegion::Register(**ucx, own.data(), bytes));
  if (!region.ok()) {
    std::cerr << region.status() << "\n";
    return 1;
  }
  const std::span<uint8_t> pool(static_cast<uint8_t*>((*region)->data()), bytes);
  std::fill(pool.begin(), pool.end(), 0);
  std::cout << baton::testing::Hex((*ucx)->address()) << " "
            << baton::testing::Hex((*region)->packed_rkey()) << " " << (*region)->base()
            << std::endl;
  std::string line;
  // Each "hash" line: hash the pool and clear it for the next round, then answer (the
  // sender starts the next round once it has the answer).
  while (std::getline(std::cin, line) && line == "hash") {
    const uint64_t hash = XXH3_64bits(pool.data(), pool.size());
    std::fill(pool.begin(), pool.end(), 0);
    std::cout << hash << std::endl;
  }
  return 0;
}

// ucx_perftest's ucp_put_bw between two processes on this host; bytes/s, 0 on failure.
double PerftestBandwidth(const std::string& transports, int64_t message_bytes, int64_t iters,
                         int port) {
  const std::string tls = "UCX_TLS=" + transports;
  const std::vector<std::string> common = {
      "ucx_perftest",        "-t", "ucp_put_bw",        "-s", std::to_string(message_bytes), "-n",
      std::to_string(iters), "-p", std::to_string(port)};
  ChildProcess server(common, {tls});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::vector<std::string> client_args = common;
  client_args.emplace_back("127.0.0.1");
  ChildProcess client(client_args, {tls});
  double mb_per_s = 0;
  for (;;) {
    const std::string line = client.ReadLine();
    if (line.rfind("Final:", 0) == 0) {
      std::istringstream in(line.substr(6));
      double f[8] = {};
      for (double& x : f) in >> x;
      mb_per_s = f[5];  // overall bandwidth, MB/s (MiB)
    }
    if (line.empty() && client.AtEnd()) break;
  }
  client.Wait();
  server.Signal(SIGTERM);
  server.Wait();
  return mb_per_s * 1024 * 1024;
}

int Main(int argc, char** argv) {
  Shape shape;
  std::vector<std::string> transports = {"tcp", "sm"};
  int rounds = 5;
  int port = 13337;
  bool receiver = false;
  std::string order = "layer";
  std::string receiver_tls;
  std::string pool_mode = "auto";
  CLI::App app{"kv_transfer_bench: UCX KV page transfer GB/s against ucx_perftest ucp_put_bw"};
  app.add_option("--transports", transports, "UCX_TLS values to measure (comma list)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--tokens", shape.tokens, "prompt tokens")->capture_default_str();
  app.add_option("--layers", shape.layers, "model layers")->capture_default_str();
  app.add_option("--kv-heads", shape.kv_heads, "KV heads")->capture_default_str();
  app.add_option("--head-dim", shape.head_dim, "head dim")->capture_default_str();
  app.add_option("--rounds", rounds, "transfers per transport; the median is reported")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--port", port, "ucx_perftest's port")->capture_default_str();
  app.add_option("--order", order,
                 "layer: layer 0 of every page first, as a layer-wise push sends; page: each "
                 "page whole, one contiguous run")
      ->check(CLI::IsMember({"layer", "page"}))
      ->capture_default_str();
  app.add_option("--pool", pool_mode,
                 "the receiver's pool: auto (as a decode worker: UCX allocates it when the "
                 "transports include shared memory), ucx, or own (registered process memory)")
      ->check(CLI::IsMember({"auto", "ucx", "own"}))
      ->capture_default_str();
  app.add_flag("--receiver", receiver, "internal: run as the receiving process");
  app.add_option("--receiver-tls", receiver_tls, "internal");
  CLI11_PARSE(app, argc, argv);
  if (receiver) return Receiver(receiver_tls, pool_mode, shape.bytes());

  const int64_t total_puts = shape.pages() * shape.layers;
  std::printf(
      "kv_transfer_bench: %lld tokens, %lld layers, %lld KV heads, head_dim %lld, f32: "
      "%lld pages of %lld KiB, %lld puts of %lld KiB, %.0f MiB\n",
      static_cast<long long>(shape.tokens), static_cast<long long>(shape.layers),
      static_cast<long long>(shape.kv_heads), static_cast<long long>(shape.head_dim),
      static_cast<long long>(shape.pages()), static_cast<long long>(shape.page_bytes() / 1024),
      static_cast<long long>(total_puts), static_cast<long long>(shape.chunk_bytes() / 1024),
      shape.bytes() / 1048576.0);
  const std::vector<uint8_t> source = baton::testing::Pattern(shape.bytes(), 5);
  const uint64_t want_hash = XXH3_64bits(source.data(), source.size());
  bool ok = true;
  std::printf("\n%-10s %11s %12s %15s %8s %15s %8s\n", "transport", "baton GB/s", "min..max",
              "perftest 1 msg", "ratio", "perftest chunk", "ratio");
  for (const std::string& tls : transports) {
    ChildProcess peer({"/proc/self/exe", "--receiver", "--receiver-tls", tls, "--pool", pool_mode,
                       "--tokens", std::to_string(shape.tokens), "--layers",
                       std::to_string(shape.layers), "--kv-heads", std::to_string(shape.kv_heads),
                       "--head-dim", std::to_string(shape.head_dim)});
    std::istringstream info(peer.ReadLine());
    std::string address_hex, rkey_hex;
    uint64_t base = 0;
    info >> address_hex >> rkey_hex >> base;
    auto ucx = UcxWorker::Create({.transports = tls});
    if (address_hex.empty() || !ucx.ok()) {
      std::fprintf(stderr, "%s: the receiver or UCX did not start\n", tls.c_str());
      peer.Wait();
      ok = false;
      continue;
    }
    auto local =
        RegisteredRegion::Register(**ucx, const_cast<uint8_t*>(source.data()), source.size());
    auto ep = UcxEndpoint::Connect(**ucx, baton::testing::Unhex(address_hex));
    absl::StatusOr<std::unique_ptr<RemoteRegion>> remote =
        ep.ok() ? (*ep)->ImportRegion(baton::testing::Unhex(rkey_hex), base, shape.bytes())
                : absl::StatusOr<std::unique_ptr<RemoteRegion>>(ep.status());
    if (!local.ok() || !remote.ok()) {
      std::fprintf(stderr, "%s: %s\n", tls.c_str(),
                   std::string((!local.ok() ? local.status() : remote.status()).message()).c_str());
      peer.Wait();
      ok = false;
      continue;
    }
    std::vector<double> gbps;
    for (int r = 0; r < rounds && ok; ++r) {
      const auto start = Clock::now();
      absl::Status s;
      const int64_t puts = shape.layers * shape.pages();
      for (int64_t i = 0; i < puts && s.ok(); ++i) {
        const int64_t layer = order == "layer" ? i / shape.pages() : i % shape.layers;
        const int64_t page = order == "layer" ? i % shape.pages() : i / shape.layers;
        const int64_t offset = page * shape.page_bytes() + layer * shape.chunk_bytes();
        s = (*ep)->Put(source.data() + offset, shape.chunk_bytes(), **remote, offset, local->get());
      }
      if (s.ok()) s = (*ep)->Flush(absl::Now() + absl::Seconds(120));
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      peer.WriteLine("hash");
      const std::string got = peer.ReadLine();
      if (!s.ok() || got != std::to_string(want_hash)) {
        std::fprintf(stderr, "%s round %d: %s\n", tls.c_str(), r,
                     s.ok() ? "the receiver's pages differ from what was sent"
                            : std::string(s.message()).c_str());
        ok = false;
        break;
      }
      gbps.push_back(shape.bytes() / seconds / 1e9);
    }
    remote->reset();
    ep->reset();
    peer.Wait();
    if (gbps.empty()) continue;
    std::sort(gbps.begin(), gbps.end());
    const double median = gbps[gbps.size() / 2];
    // Two references on the same transport: the same bytes as one message (a cold,
    // memory-bound copy like ours), and our put size repeated on one buffer (which stays in
    // cache on shared memory, so it bounds the per-put overhead, not the copy).
    const double whole = PerftestBandwidth(tls, shape.bytes(), 5, port) / 1e9;
    const int64_t iters = std::max<int64_t>(1000, shape.pages() * shape.layers);
    const double chunk = PerftestBandwidth(tls, shape.chunk_bytes(), iters, port) / 1e9;
    auto ratio = [median](double ref) {
      char out[16] = "-";
      if (ref > 0) std::snprintf(out, sizeof(out), "%.2f", median / ref);
      return std::string(out);
    };
    std::printf("%-10s %11.2f %5.2f..%-5.2f %15.2f %8s %15.2f %8s\n", tls.c_str(), median,
                gbps.front(), gbps.back(), whole, ratio(whole).c_str(), chunk,
                ratio(chunk).c_str());
  }
  std::printf(
      "(goal: ratio >= 0.8. perftest: ucx_perftest -t ucp_put_bw between two "
      "processes, UCX_TLS as listed; '1 msg': -s %lld -n 5; 'chunk': -s %lld)\n",
      (long long)shape.bytes(), (long long)shape.chunk_bytes());
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace baton::bench

int main(int argc, char** argv) {
  try {
    return baton::bench::Main(argc, argv);
  } catch (const std::exception& e) {  // CLI11 and the standard library may throw
    std::fprintf(stderr, "kv_transfer_bench: %s\n", e.what());
    return 2;
  }
}
