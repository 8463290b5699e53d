// KV transfer throughput: a prompt's pages written layer by layer into another process's
// registered page pool with UCX RMA puts (transport/), against ucx_perftest's ucp_put_bw on
// the same transport and message size, run in the same invocation (docs/perf/transport.md).
//
// Shape: the 1B-shaped model (Llama 3.2 1B: 16 layers, 8 KV heads, head_dim 64), bf16 KV as
// the engine stores it by default (--kv-cache-dtype f32: the f32 option), 16-token pages.
// One put carries one layer's K and V of one page (32 KiB in bf16), in the order a
// layer-wise push sends them: layer 0 of every page, then layer 1, ... A 4096-token
// prompt is 256 pages, 128 MiB in bf16.
//
// The receiver's pool is allocated as a decode worker's is (--pool auto): by UCX when the
// transports include shared memory, so that puts land directly; else by the process and
// registered. `--pool own` registers the process's memory everywhere, as before.
//
// The receiver is this binary in `--receiver` mode, a separate process. After each round it
// hashes its pool (XXH3) and the sender compares: a transfer that loses or misplaces a byte
// fails the run.
//
// `--groups S:R,...` measures worker groups too (docs/parallel.md, "KV transfers with
// groups"): S prefill ranks, threads of this process with a UcxWorker, a registered source
// and RemotePools each, every one holding its slice of the KV heads (kv_heads / S, from
// rank * that), push into R receiver processes, each holding its slice (kv_heads / R), with
// worker::SlicePush as a prefill rank does: layer by layer, one put per run of
// kvcache::SliceCopyRuns. Different TP makes runs of one position's heads (1 KiB for the 1B
// shape at 2:1 or 1:2), so the "run" reference is ucp_put_bw at that pair's put size. The
// K/V is a function of (page, layer, K or V, position, model KV head, d), so the sender
// computes every receiver rank's expected pool and compares its hash. 1:1 is the path
// above, unchanged.

#include <signal.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <memory>
#include <numeric>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "kvcache/page_layout.h"
#include "kvcache/slice_copy.h"
#include "tests/unit/transport/ucx_test_util.h"
#include "transport/registered_region.h"
#include "transport/transfer_ticket.h"
#include "transport/ucx_endpoint.h"
#include "transport/ucx_worker.h"
#include "worker/rank_kv.h"
#include "worker/remote_pools.h"
#include "worker/slice_push.h"
#include "xxhash.h"

namespace baton::bench {
namespace {

using baton::testing::ChildProcess;
using kvcache::PageLayout;
using transport::RegisteredRegion;
using transport::RemoteRegion;
using transport::UcxEndpoint;
using transport::UcxWorker;
using Clock = std::chrono::steady_clock;

struct Shape {
  int64_t layers = 16, kv_heads = 8, head_dim = 64, block_size = 16, tokens = 4096;
  std::string dtype = "bf16";  // the KV element type: bf16 or f32
  int64_t elem_bytes() const { return kvcache::DtypeBytes(dtype); }
  int64_t chunk_bytes() const {  // one layer's K+V of one page
    return 2 * block_size * kv_heads * head_dim * elem_bytes();
  }
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

// A receiver process (this binary, --receiver) whose pool holds `kv_heads` KV heads of every
// page; its first line is its UCX address, its pool's rkey and its base.
std::unique_ptr<ChildProcess> StartReceiver(const std::string& tls, const std::string& pool_mode,
                                            const Shape& shape, int64_t kv_heads) {
  return std::make_unique<ChildProcess>(std::vector<std::string>{
      "/proc/self/exe", "--receiver", "--receiver-tls", tls, "--pool", pool_mode, "--tokens",
      std::to_string(shape.tokens), "--layers", std::to_string(shape.layers), "--kv-heads",
      std::to_string(kv_heads), "--head-dim", std::to_string(shape.head_dim), "--kv-cache-dtype",
      shape.dtype});
}

struct ReceiverInfo {
  std::string address, rkey;  // bytes
  uint64_t base = 0;
};

ReceiverInfo ReadReceiverInfo(ChildProcess& peer) {
  std::istringstream info(peer.ReadLine());
  std::string address_hex, rkey_hex;
  ReceiverInfo out;
  info >> address_hex >> rkey_hex >> out.base;
  out.address = baton::testing::Unhex(address_hex);
  out.rkey = baton::testing::Unhex(rkey_hex);
  return out;
}

// The one-process-to-one path: every layer's K and V of every page as one put (64 KiB for
// the 1B shape), from a Pattern; GB/s per round, empty (and *ok false) on a failure.
std::vector<double> PushOneToOne(const std::string& tls, const std::string& pool_mode,
                                 const std::string& order, const Shape& shape, int rounds,
                                 const std::vector<uint8_t>& source, uint64_t want_hash, bool* ok) {
  std::vector<double> gbps;
  std::unique_ptr<ChildProcess> peer = StartReceiver(tls, pool_mode, shape, shape.kv_heads);
  const ReceiverInfo info = ReadReceiverInfo(*peer);
  auto ucx = UcxWorker::Create({.transports = tls});
  if (info.address.empty() || !ucx.ok()) {
    std::fprintf(stderr, "%s: the receiver or UCX did not start\n", tls.c_str());
    peer->Wait();
    *ok = false;
    return gbps;
  }
  auto local =
      RegisteredRegion::Register(**ucx, const_cast<uint8_t*>(source.data()), source.size());
  auto ep = UcxEndpoint::Connect(**ucx, info.address);
  absl::StatusOr<std::unique_ptr<RemoteRegion>> remote =
      ep.ok() ? (*ep)->ImportRegion(info.rkey, info.base, shape.bytes())
              : absl::StatusOr<std::unique_ptr<RemoteRegion>>(ep.status());
  if (!local.ok() || !remote.ok()) {
    std::fprintf(stderr, "%s: %s\n", tls.c_str(),
                 std::string((!local.ok() ? local.status() : remote.status()).message()).c_str());
    peer->Wait();
    *ok = false;
    return gbps;
  }
  for (int r = 0; r < rounds && *ok; ++r) {
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
    peer->WriteLine("hash");
    const std::string got = peer->ReadLine();
    if (!s.ok() || got != std::to_string(want_hash)) {
      std::fprintf(stderr, "%s round %d: %s\n", tls.c_str(), r,
                   s.ok() ? "the receiver's pages differ from what was sent"
                          : std::string(s.message()).c_str());
      *ok = false;
      break;
    }
    gbps.push_back(shape.bytes() / seconds / 1e9);
  }
  remote->reset();
  ep->reset();
  peer->Wait();
  if (!*ok) gbps.clear();
  return gbps;
}

// One pair of --groups: sender ranks S into receiver ranks R, each a TP group.
struct GroupPair {
  int senders = 1, receivers = 1;
  bool one_to_one() const { return senders == 1 && receivers == 1; }
  std::string name() const { return std::to_string(senders) + ":" + std::to_string(receivers); }
};

// Rank `rank` of a TP group of `tp` ranks: kv_heads / tp heads from rank * that, every layer.
PageLayout RankLayout(const Shape& shape, int tp, int rank) {
  PageLayout l;
  l.num_layers = shape.layers;
  l.num_kv_heads = shape.kv_heads / tp;
  l.head_dim = shape.head_dim;
  l.block_size = shape.block_size;
  l.dtype = shape.dtype;
  l.first_kv_head = rank * l.num_kv_heads;
  l.tp_rank = rank;
  l.tp_size = tp;
  return l;
}

// splitmix64's finalizer.
uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// `l`'s slice of the prompt's pages 0..pages-1. Element (page, layer, K or V, position,
// model KV head, d) holds the low bytes of a 64-bit mix of its index in the whole model's
// page, made odd: never 0, and distinct enough in 2 bytes that a lost or misplaced run of
// a row or more changes the hash. Positions past the prompt are 0, as in a cleared
// receiver pool.
std::vector<uint8_t> SlicePages(const Shape& shape, const PageLayout& l) {
  std::vector<uint8_t> out(static_cast<size_t>(shape.pages() * l.page_bytes()));
  const int64_t elem = kvcache::DtypeBytes(l.dtype);
  uint8_t* p = out.data();
  for (int64_t page = 0; page < shape.pages(); ++page) {
    for (int64_t ll = 0; ll < l.num_layers; ++ll) {
      for (int64_t h = 0; h < l.num_kv_heads; ++h) {  // head-major: kvcache/page_layout.h
        for (int64_t half = 0; half < 2; ++half) {
          for (int64_t pos = 0; pos < l.block_size; ++pos) {
            const bool in_prompt = page * l.block_size + pos < shape.tokens;
            const int64_t row =
                (((page * shape.layers + l.first_layer + ll) * 2 + half) * shape.block_size + pos) *
                    shape.kv_heads +
                l.first_kv_head + h;
            for (int64_t d = 0; d < l.head_dim; ++d, p += elem) {
              const uint64_t v =
                  in_prompt ? Mix64(static_cast<uint64_t>(row * l.head_dim + d)) | 1 : 0;
              std::memcpy(p, &v, static_cast<size_t>(elem));  // little-endian: the low bytes
            }
          }
        }
      }
    }
  }
  return out;
}

// One sender rank: its UCX worker, its slice of the prompt registered there, and the
// receiver ranks' pools as it reaches them. Members in teardown order, last first.
struct SenderRank {
  PageLayout layout;
  std::unique_ptr<UcxWorker> ucx;
  std::vector<uint8_t> pages;
  std::unique_ptr<RegisteredRegion> region;
  std::unique_ptr<worker::RemotePools> pools;
  std::vector<worker::SliceTarget> targets;
};

struct PairResult {
  std::vector<double> gbps;  // per round
  int64_t puts = 0;          // per round, every rank's
  uint64_t bytes = 0;        // per round, every rank's
};

// S sender ranks (threads of this process) push the prompt into R receiver processes as
// a prefill group does (worker::SlicePush, layer by layer), `rounds` times. False on any
// failure, the receivers' hashes included.
bool PushGroups(const std::string& tls, const std::string& pool_mode, const Shape& shape,
                const GroupPair& pair, int rounds, PairResult* out) {
  const auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "%s %s: %s\n", tls.c_str(), pair.name().c_str(), what.c_str());
    return false;
  };
  // The receiver ranks, and the ticket a decode group would answer with.
  std::vector<std::unique_ptr<ChildProcess>> peers;
  std::vector<std::string> want;  // each receiver rank's expected pool hash
  transport::TransferTicket ticket;
  ticket.request_id = "kv_transfer_bench";
  ticket.prompt_tokens = shape.tokens;
  ticket.first_block = 0;
  for (int64_t p = 0; p < shape.pages(); ++p) ticket.page_ids.push_back(static_cast<int32_t>(p));
  ticket.lease_deadline_unix_ms = absl::ToUnixMillis(absl::Now() + absl::Minutes(5));
  for (int r = 0; r < pair.receivers; ++r) {
    const PageLayout layout = RankLayout(shape, pair.receivers, r);
    peers.push_back(StartReceiver(tls, pool_mode, shape, layout.num_kv_heads));
    const ReceiverInfo info = ReadReceiverInfo(*peers.back());
    if (info.address.empty()) return fail("receiver rank " + std::to_string(r) + " did not start");
    ticket.ranks.push_back(
        {.rank = r,
         .worker_address = info.address,
         .rkey = info.rkey,
         .pool_base = info.base,
         .pool_bytes = static_cast<uint64_t>(shape.pages() * layout.page_bytes()),
         .layout = layout});
    const std::vector<uint8_t> image = SlicePages(shape, layout);
    want.push_back(std::to_string(XXH3_64bits(image.data(), image.size())));
  }
  const transport::RankPool& first = ticket.ranks[0];
  ticket.worker_address = first.worker_address;
  ticket.rkey = first.rkey;
  ticket.pool_base = first.pool_base;
  ticket.pool_bytes = first.pool_bytes;
  ticket.layout = first.layout;

  // The sender ranks, each on a UcxWorker of its own.
  std::vector<SenderRank> senders(pair.senders);
  std::vector<PageLayout> layouts;
  for (int s = 0; s < pair.senders; ++s) {
    SenderRank& rank = senders[s];
    rank.layout = RankLayout(shape, pair.senders, s);
    layouts.push_back(rank.layout);
    auto ucx = UcxWorker::Create({.transports = tls});
    if (!ucx.ok()) return fail(std::string(ucx.status().message()));
    rank.ucx = *std::move(ucx);
    rank.pages = SlicePages(shape, rank.layout);
    auto region = RegisteredRegion::Register(*rank.ucx, rank.pages.data(), rank.pages.size());
    if (!region.ok()) return fail(std::string(region.status().message()));
    rank.region = *std::move(region);
    rank.pools = std::make_unique<worker::RemotePools>(rank.ucx.get(), absl::Seconds(30));
  }
  if (absl::Status s = transport::ValidateSlicedTicket(ticket, layouts, {}, absl::Now()); !s.ok()) {
    return fail("the ticket: " + std::string(s.message()));
  }
  const std::vector<bool> writers = kvcache::SliceWriters(layouts);
  for (SenderRank& rank : senders) {
    auto targets = worker::SliceTargetsOf(ticket, rank.layout, rank.pools.get());
    if (!targets.ok()) return fail(std::string(targets.status().message()));
    rank.targets = *std::move(targets);
  }

  std::vector<int32_t> block_table(static_cast<size_t>(shape.pages()));
  for (size_t i = 0; i < block_table.size(); ++i) block_table[i] = static_cast<int32_t>(i);
  const uint64_t prompt_bytes = static_cast<uint64_t>(
      shape.tokens * shape.layers * 2 * shape.kv_heads * shape.head_dim * shape.elem_bytes());
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::unique_ptr<worker::SlicePush>> pushes;
    for (int s = 0; s < pair.senders; ++s) {
      SenderRank& rank = senders[s];
      pushes.push_back(std::make_unique<worker::SlicePush>(
          rank.region.get(), rank.pages.data(), rank.layout, s, writers[s], rank.targets, ticket));
    }
    // The clock starts as the last rank reaches the barrier, just before any puts.
    Clock::time_point start;
    std::vector<Clock::time_point> end(pair.senders);
    std::vector<absl::Status> status(pair.senders);
    const auto on_start = [&start]() noexcept { start = Clock::now(); };
    std::barrier sync(pair.senders, on_start);
    std::vector<std::thread> threads;
    threads.reserve(pair.senders);
    for (int s = 0; s < pair.senders; ++s) {
      threads.emplace_back([&, s] {
        sync.arrive_and_wait();
        for (int64_t layer = 0; layer < shape.layers; ++layer) {
          pushes[s]->OnLayerWritten(layer, block_table, 0, shape.tokens);
        }
        status[s] = pushes[s]->Flush(absl::Now() + absl::Seconds(120));
        end[s] = Clock::now();
      });
    }
    for (std::thread& t : threads) t.join();
    const double seconds =
        std::chrono::duration<double>(*std::max_element(end.begin(), end.end()) - start).count();
    for (int s = 0; s < pair.senders; ++s) {
      if (!status[s].ok()) {
        return fail("round " + std::to_string(round) + ", sender rank " + std::to_string(s) + ": " +
                    std::string(status[s].message()));
      }
    }
    int64_t puts = 0;
    uint64_t bytes = 0;
    for (const auto& push : pushes) {
      puts += push->puts();
      bytes += push->bytes_sent();
    }
    for (auto& peer : peers) peer->WriteLine("hash");
    for (int r = 0; r < pair.receivers; ++r) {
      if (peers[r]->ReadLine() != want[r]) {
        return fail("round " + std::to_string(round) + ": receiver rank " + std::to_string(r) +
                    "'s pages differ from what its slice should hold");
      }
    }
    if (bytes != prompt_bytes) {
      return fail("round " + std::to_string(round) + ": sent " + std::to_string(bytes) +
                  " bytes; the prompt's K/V is " + std::to_string(prompt_bytes));
    }
    out->puts = puts;
    out->bytes = bytes;
    out->gbps.push_back(bytes / seconds / 1e9);
  }
  senders.clear();  // the endpoints close while the receivers still run
  // Every receiver's input first: a later receiver inherited the pipes to earlier ones.
  for (auto& peer : peers) peer->CloseInput();
  for (auto& peer : peers) peer->Wait();
  return true;
}

// "64 KiB", "1 KiB", or bytes when not whole KiB.
std::string SizeString(int64_t bytes) {
  char out[32];
  if (bytes >= 1024 && bytes % 1024 == 0) {
    std::snprintf(out, sizeof(out), "%lld KiB", static_cast<long long>(bytes / 1024));
  } else {
    std::snprintf(out, sizeof(out), "%lld B", static_cast<long long>(bytes));
  }
  return out;
}

int Main(int argc, char** argv) {
  Shape shape;
  std::vector<std::string> transports = {"tcp", "sm"};
  std::vector<std::string> groups = {"1:1"};
  int rounds = 5;
  int cycles = 3;
  int port = 13337;
  bool no_perftest = false;
  bool receiver = false;
  std::string order = "layer";
  std::string receiver_tls;
  std::string pool_mode = "auto";
  CLI::App app{"kv_transfer_bench: UCX KV page transfer GB/s against ucx_perftest ucp_put_bw"};
  app.add_option("--transports", transports, "UCX_TLS values to measure (comma list)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--groups", groups,
                 "SENDER_TP:RECEIVER_TP pairs to measure (comma list): sender ranks as threads "
                 "with a UcxWorker each, receiver ranks as processes, each rank holding "
                 "kv-heads / TP heads; 1:1 is one process into one")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--tokens", shape.tokens, "prompt tokens")->capture_default_str();
  app.add_option("--layers", shape.layers, "model layers")->capture_default_str();
  app.add_option("--kv-heads", shape.kv_heads,
                 "KV heads (for --receiver: the heads of its rank's slice)")
      ->capture_default_str();
  app.add_option("--head-dim", shape.head_dim, "head dim")->capture_default_str();
  app.add_option("--kv-cache-dtype", shape.dtype, "KV element type, as the engine's flag")
      ->check(CLI::IsMember({"bf16", "f32"}))
      ->capture_default_str();
  app.add_option("--rounds", rounds, "transfers per transport; the median is reported")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--cycles", cycles,
                 "per pair: cycles of --rounds, each between two perftest references; the "
                 "ratio is the median of the cycles' (1 with --no-perftest)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--port", port,
                 "ucx_perftest's first port; each run takes the next, so that none waits for "
                 "the last one's socket")
      ->capture_default_str();
  app.add_flag("--no-perftest", no_perftest,
               "skip the ucx_perftest references (the smoke tests check the data only)");
  app.add_option("--order", order,
                 "layer: layer 0 of every page first, as a layer-wise push sends; page: each "
                 "page whole, one contiguous run (1:1 only; groups push layer by layer)")
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
  if (no_perftest) cycles = 1;  // there is nothing to alternate with

  std::vector<GroupPair> pairs;
  for (const std::string& g : groups) {
    GroupPair p;
    char colon = 0;
    std::istringstream in(g);
    if (!(in >> p.senders >> colon >> p.receivers) || colon != ':' || !in.eof() || p.senders < 1 ||
        p.receivers < 1 || shape.kv_heads % p.senders != 0 || shape.kv_heads % p.receivers != 0) {
      std::fprintf(stderr,
                   "kv_transfer_bench: --groups %s: want SENDER_TP:RECEIVER_TP, each at least 1 "
                   "and dividing --kv-heads %lld\n",
                   g.c_str(), static_cast<long long>(shape.kv_heads));
      return 2;
    }
    pairs.push_back(p);
  }
  // Only 1:1: today's table, unchanged.
  const bool grouped = !(pairs.size() == 1 && pairs[0].one_to_one());

  const int64_t total_puts = shape.pages() * shape.layers;
  std::printf(
      "kv_transfer_bench: %lld tokens, %lld layers, %lld KV heads, head_dim %lld, %s: "
      "%lld pages of %lld KiB, %lld puts of %lld KiB, %.0f MiB\n",
      static_cast<long long>(shape.tokens), static_cast<long long>(shape.layers),
      static_cast<long long>(shape.kv_heads), static_cast<long long>(shape.head_dim),
      shape.dtype.c_str(), static_cast<long long>(shape.pages()),
      static_cast<long long>(shape.page_bytes() / 1024), static_cast<long long>(total_puts),
      static_cast<long long>(shape.chunk_bytes() / 1024), shape.bytes() / 1048576.0);
  std::vector<uint8_t> source;
  uint64_t want_hash = 0;
  if (std::any_of(pairs.begin(), pairs.end(), [](const GroupPair& p) { return p.one_to_one(); })) {
    source = baton::testing::Pattern(shape.bytes(), 5);
    want_hash = XXH3_64bits(source.data(), source.size());
  }
  bool ok = true;
  if (grouped) {
    std::printf("\n%-10s %5s %11s %12s %8s %9s %15s %16s %13s %16s\n", "transport", "pair",
                "baton GB/s", "min..max", "puts", "put size", "perftest 1 msg", "ratio",
                "perftest run", "ratio");
  } else {
    std::printf("\n%-10s %11s %12s %15s %16s %15s %16s\n", "transport", "baton GB/s", "min..max",
                "perftest 1 msg", "ratio", "perftest chunk", "ratio");
  }
  struct Row {
    GroupPair pair;
    std::vector<double> gbps;  // sorted
    int64_t puts = 0;
    int64_t put_bytes = 0;  // typical: bytes / puts
    double whole = 0;       // perftest, one message of the prompt's bytes, GB/s
    double run = 0;         // perftest at put_bytes, GB/s
    std::vector<double> whole_ratios, run_ratios;  // per cycle, sorted
    std::vector<double> cycle_medians;             // GB/s, sorted
  };
  for (const std::string& tls : transports) {
    std::vector<Row> rows;
    double tcp_whole = -1;  // the one-message reference on tcp, once per transport
    int perftest_runs = 0;
    for (const GroupPair& pair : pairs) {
      if (!ok) break;
      Row row;
      row.pair = pair;
      // The references on the same transport, each taken just before and just after the
      // pair's rounds and averaged, so that the ratio compares one window of this host:
      // the same bytes as one message (a cold, memory-bound copy like ours; on tcp it is
      // pathologically slow, a minute a run, and taken once), and the pair's put size
      // repeated on one buffer (which stays in cache on shared memory, so it bounds the
      // per-put overhead, not the copy). The put size is known only after the rounds;
      // before them it is the equal-slice size: a 1:1 push's put over the larger group.
      const int64_t guess = shape.chunk_bytes() / std::max(pair.senders, pair.receivers);
      const bool whole_each_pair = tls.find("tcp") == std::string::npos;
      const auto refs = [&](int64_t put_bytes, int64_t puts, double* whole, double* run) {
        *whole = *run = 0;
        if (no_perftest) return;
        if (whole_each_pair || tcp_whole < 0) {
          *whole = PerftestBandwidth(tls, shape.bytes(), 5, port + perftest_runs++ % 64) / 1e9;
          if (!whole_each_pair) tcp_whole = *whole;
        } else {
          *whole = tcp_whole;
        }
        *run = PerftestBandwidth(tls, put_bytes, std::max<int64_t>(1000, puts),
                                 port + perftest_runs++ % 64) /
               1e9;
      };
      // `cycles` cycles of the pair's rounds, a reference before each and one after the
      // last: each cycle's ratio is its median over the mean of the references either side,
      // and the ratio reported is the median of those (this host's speed drifts by a third
      // within minutes, perftest's as much as ours).
      double whole_prev = 0, run_prev = 0;
      refs(guess, shape.bytes() / guess, &whole_prev, &run_prev);
      std::vector<double> whole_refs, run_refs;
      for (int cycle = 0; cycle < cycles && ok; ++cycle) {
        std::vector<double> gbps;
        if (pair.one_to_one()) {
          gbps = PushOneToOne(tls, pool_mode, order, shape, rounds, source, want_hash, &ok);
          row.puts = total_puts;
          row.put_bytes = shape.chunk_bytes();
        } else {
          PairResult result;
          ok = PushGroups(tls, pool_mode, shape, pair, rounds, &result) && ok;
          gbps = result.gbps;
          row.puts = result.puts;
          row.put_bytes = result.puts > 0 ? static_cast<int64_t>(result.bytes / result.puts) : 0;
        }
        if (!ok || gbps.empty()) break;
        std::sort(gbps.begin(), gbps.end());
        const double median = gbps[gbps.size() / 2];
        row.gbps.insert(row.gbps.end(), gbps.begin(), gbps.end());
        row.cycle_medians.push_back(median);
        double whole_after = 0, run_after = 0;
        refs(row.put_bytes > 0 ? row.put_bytes : guess, row.puts, &whole_after, &run_after);
        if (cycle == 0 && row.put_bytes != guess)
          run_prev = run_after;  // the guess was another size
        const auto mean = [](double a, double b) { return a > 0 && b > 0 ? (a + b) / 2 : 0.0; };
        const double whole = mean(whole_prev, whole_after), run = mean(run_prev, run_after);
        if (whole > 0) row.whole_ratios.push_back(median / whole);
        if (run > 0) row.run_ratios.push_back(median / run);
        if (whole > 0) whole_refs.push_back(whole);
        if (run > 0) run_refs.push_back(run);
        whole_prev = whole_after;
        run_prev = run_after;
      }
      if (!ok || row.gbps.empty()) break;
      std::sort(row.gbps.begin(), row.gbps.end());
      std::sort(row.whole_ratios.begin(), row.whole_ratios.end());
      std::sort(row.cycle_medians.begin(), row.cycle_medians.end());
      std::sort(row.run_ratios.begin(), row.run_ratios.end());
      const auto average = [](const std::vector<double>& v) {
        return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / v.size();
      };
      row.whole = average(whole_refs);
      row.run = average(run_refs);
      rows.push_back(std::move(row));
    }
    for (const Row& row : rows) {
      // The median cycle's median: each cycle's first round maps the receivers' pools
      // afresh (min..max shows it), and a median of all rounds would count those.
      const double median = row.cycle_medians[row.cycle_medians.size() / 2];
      // The median of the cycles' ratios, and their range when there are several.
      auto ratio = [](const std::vector<double>& r) {
        char out[32] = "-";
        if (r.size() == 1) std::snprintf(out, sizeof(out), "%.2f", r[0]);
        if (r.size() > 1) {
          std::snprintf(out, sizeof(out), "%.2f %.2f..%.2f", r[r.size() / 2], r.front(), r.back());
        }
        return std::string(out);
      };
      if (grouped) {
        std::printf("%-10s %5s %11.2f %5.2f..%-5.2f %8lld %9s %15.2f %16s %13.2f %16s\n",
                    tls.c_str(), row.pair.name().c_str(), median, row.gbps.front(), row.gbps.back(),
                    static_cast<long long>(row.puts), SizeString(row.put_bytes).c_str(), row.whole,
                    ratio(row.whole_ratios).c_str(), row.run, ratio(row.run_ratios).c_str());
      } else {
        std::printf("%-10s %11.2f %5.2f..%-5.2f %15.2f %16s %15.2f %16s\n", tls.c_str(), median,
                    row.gbps.front(), row.gbps.back(), row.whole, ratio(row.whole_ratios).c_str(),
                    row.run, ratio(row.run_ratios).c_str());
      }
    }
  }
  if (grouped) {
    std::printf(
        "(goal: ratio >= 0.8. perftest: ucx_perftest -t ucp_put_bw between two processes, "
        "UCX_TLS as listed; '1 msg': -s %lld -n 5; 'run': -s <put size> -n max(1000, puts). "
        "pair S:R: S sender ranks, threads with a UcxWorker each, push their KV-head slices "
        "with SlicePush into R receiver processes, timed from the first put to the last "
        "flush; puts are per transfer, all ranks; %d cycles of %d rounds, each between two "
        "references: ratio is the median of the cycles' median over the mean of the references "
        "either side, then their range; perftest columns are the mean of the references)\n",
        (long long)shape.bytes(), cycles, rounds);
  } else {
    std::printf(
        "(goal: ratio >= 0.8. perftest: ucx_perftest -t ucp_put_bw between two "
        "processes, UCX_TLS as listed; '1 msg': -s %lld -n 5; 'chunk': -s %lld; %d cycles of "
        "%d rounds, each between two references: ratio is the median of the cycles' median over "
        "the mean of the references either side, then their range)\n",
        (long long)shape.bytes(), (long long)shape.chunk_bytes(), cycles, rounds);
  }
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
