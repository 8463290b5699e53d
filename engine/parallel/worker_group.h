// A worker group: tp x pp ranks that serve one model as one worker.
//
// World rank r is pipeline stage r / tp, tensor-parallel rank r % tp. Rank 0, the leader,
// runs the engine (scheduler, prefix cache, sampler); every step it broadcasts the plan
// (group_step.h) and every rank runs its shard of the forward over its own pages, under
// the same page ids. Within a stage the ranks sum their partial outputs (all-reduce);
// between stages the residual stream goes by send/recv, micro-batch by micro-batch, so
// that stage s works on micro-batch m while stage s+1 works on m-1; the last stage's
// tensor-parallel rank 0 sends the logits back to the leader.
//
//   Leader:    EngineOptions.backend = GroupBackend factory (see MakeGroupBackendFactory)
//   Followers: BATON_RETURN_IF_ERROR(RunGroupFollower(model, comms, threads));
//
// When a rank dies or hangs, the next collective fails within the group's timeout; the
// leader's backend turns broken (its steps fail with Unavailable), and the followers
// return an error from RunGroupFollower, so that no process waits forever. An idle
// leader sends a keep-alive every second so that idle followers can tell a hung leader
// from a quiet one.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/thread_pool.h"
#include "engine/backend.h"
#include "engine/parallel/group_step.h"
#include "engine/parallel/rank_kv.h"
#include "kvcache/kv_pool.h"
#include "model/arch/llama.h"
#include "model/model.h"
#include "model/shard.h"
#include "parallel/communicator.h"
#include "parallel/store.h"

namespace baton::engine {

struct GroupOptions {
  int tp_size = 1;
  int pp_size = 1;
  int rank = 0;  // world rank: pp_rank * tp_size + tp_rank
  parallel::Store* store = nullptr;
  std::string address = "127.0.0.1";  // the interface this rank's collectives bind to
  // Bound on every collective and on a follower's wait for the next step. A step of one
  // stage (or one layer, within a stage) must take less.
  std::chrono::milliseconds timeout{10000};
  std::chrono::milliseconds keepalive{1000};
  // How long ConnectGroup waits for the other ranks to meet (0: `timeout`).
  std::chrono::milliseconds rendezvous_timeout{0};
  int micro_batches = 0;       // pipeline micro-batches per step; 0: 2 x pp
  std::string name = "group";  // store key prefix; one per group sharing a store
};

model::RankPlacement PlacementOf(const GroupOptions& options);

// One rank's communicators: the whole group, and this stage's tensor-parallel ranks.
struct GroupComms {
  model::RankPlacement at;
  int world_rank = 0;
  std::unique_ptr<parallel::Communicator> world;
  std::unique_ptr<parallel::Communicator> tp;  // null when tp_size == 1
};

// Every rank calls this; it returns once the whole group is connected.
absl::StatusOr<GroupComms> ConnectGroup(const GroupOptions& options);

// One rank's part of a step: its stage's layers over its pages, with the sends and
// receives of the pipeline. The same code runs on the leader and on the followers.
class StageRunner {
 public:
  StageRunner(const model::Model& model, const model::Shard& shard, kvcache::KvPool* pool,
              ThreadPool* threads, GroupComms* comms);
  // On the leader `out` gets the logits the plan asks for; elsewhere it is scratch.
  absl::Status Run(const GroupStep& plan, ForwardOutput* out);
  model::LlamaForward& forward() { return forward_; }
  // This rank's part of KV transfers (may be null); must outlive the runner.
  void set_rank_kv(RankKv* kv) { rank_kv_ = kv; }

 private:
  absl::Status RunStage(const GroupStep& plan, const std::vector<SequenceInput>& inputs,
                        ForwardOutput* out);

  static constexpr uint32_t kLogitsTag = 1u << 20;
  const model::ModelConfig& config_;
  model::Shard shard_;
  kvcache::KvPool* pool_;
  GroupComms* comms_;
  RankKv* rank_kv_ = nullptr;
  model::LlamaForward forward_;
  std::vector<std::vector<float>> hidden_;  // per micro-batch
  std::vector<ForwardOutput> micro_out_;
};

// The leader's Backend. Broadcasts the group's setup (page count) when created.
class GroupBackend : public Backend {
 public:
  // `rank_kv` is the leader's own part of KV transfers (may be null).
  static absl::StatusOr<std::unique_ptr<GroupBackend>> Create(
      const model::Model& model, const GroupOptions& options, GroupComms comms,
      kvcache::KvPool* pool, ThreadPool* threads, std::unique_ptr<RankKv> rank_kv = {});
  ~GroupBackend() override;  // tells the followers to exit

  absl::Status Forward(std::span<const SequenceInput> batch, ForwardOutput* out) override;
  // A group's sinks are group pushes (KvSink::group_push): every rank's RankKv sees the
  // layers it computes, so the leader's engine hook has nothing to do.
  void set_layer_kv_hook(LayerKvHook) override {}
  const char* name() const override { return name_.c_str(); }
  // OK while every rank answers; the error that broke the group after.
  absl::Status health() const;

  // Asks every rank's RankKv (the leader's too) `request` between steps; the replies by
  // world rank. A rank's error is its entry's; a rank that does not answer breaks the
  // group (the outer status). Thread-safe: calls and steps take turns.
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> CallRanks(std::string_view request);
  int size() const { return options_.tp_size * options_.pp_size; }

 private:
  GroupBackend(const model::Model& model, const GroupOptions& options, GroupComms comms,
               kvcache::KvPool* pool, ThreadPool* threads, std::unique_ptr<RankKv> rank_kv);
  absl::Status SendLocked(StepOp op, const std::string& body);  // with mu_ held
  void KeepAlive();

  GroupOptions options_;
  GroupComms comms_;
  kvcache::KvPool* pool_;
  std::unique_ptr<RankKv> rank_kv_;
  StageRunner stage_;
  std::string name_;

  mutable std::mutex mu_;  // the world communicator: steps and keep-alives
  absl::Status broken_;
  std::chrono::steady_clock::time_point last_sent_;
  bool stop_ = false;
  std::condition_variable stop_cv_;
  std::thread keepalive_;
};

// The factory the leader's engine calls once its pool exists (EngineOptions::backend).
// `kv.make`, if set, makes the leader's RankKv over that pool (kv.pool_memory is the
// engine's to use: EngineOptions::kv_pool_memory). `created`, if set, is told the backend.
std::function<absl::StatusOr<std::unique_ptr<Backend>>(kvcache::KvPool*, ThreadPool*)>
MakeGroupBackendFactory(const model::Model* model, GroupOptions options,
                        std::shared_ptr<GroupComms> comms, RankKvSetup kv = {},
                        std::function<void(GroupBackend*)> created = {});

// A follower rank: receives the setup, makes its pool (the leader's page count, its own
// layout), and runs steps until the leader shuts the group down (OK) or the group breaks
// (the error). `model` holds this rank's shard. `on_ready`, if set, is called once the
// pool exists (a follower's health turns SERVING there). `kv`: this rank's part of KV
// transfers (its pool's memory, its RankKv).
absl::Status RunGroupFollower(const model::Model& model, const GroupOptions& options,
                              GroupComms* comms, ThreadPool* threads,
                              const std::function<void()>& on_ready = {},
                              const RankKvSetup& kv = {});

}  // namespace baton::engine
