// The ranks of a worker group beyond the leader (engine/parallel/worker_group.h), as
// processes on this host: `baton worker --group-rank R ...`, started by the leader and
// ended with it (SIGTERM when it stops or dies). A rank serves grpc.health.v1 only: the
// leader serves the worker API for the whole group.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/child_process.h"
#include "engine/parallel/worker_group.h"
#include "kvcache/page_layout.h"
#include "model/model.h"
#include "parallel/tcp_store.h"

namespace baton::worker {

struct WorkerFlags;

class GroupRanks {
 public:
  // Makes a private rendezvous directory and starts ranks 1 .. group_size-1 with the
  // leader's model and engine flags; returns once each has said it is up (it then waits
  // for the leader in the rendezvous). `threads` is each rank's compute threads.
  static absl::StatusOr<std::unique_ptr<GroupRanks>> Start(const WorkerFlags& leader, int threads);
  ~GroupRanks();  // stops the ranks and removes the directory

  const std::string& store_dir() const { return store_dir_; }
  // pid per rank (index 0 is the leader: -1).
  std::vector<int> pids() const;

 private:
  GroupRanks() = default;
  std::string store_dir_;
  std::vector<std::unique_ptr<ChildProcess>> ranks_;
};

// The group flags checked together, each error naming its flags: --group-size against
// tp x pp, --group-rank inside the group, a rank above 0 with a rendezvous to meet at,
// --group-leader with a token.
absl::Status CheckGroupFlags(const WorkerFlags& flags);

// Ranks on several hosts start at different times and each loads its shard before the
// group meets: their rendezvous waits this long.
inline constexpr std::chrono::minutes kMultiHostRendezvous{10};

// Rank 0 of a multi-host group: serves the rendezvous at --group-leader and sets where
// the leader's collectives bind and how long it waits for the others.
absl::StatusOr<std::unique_ptr<parallel::TcpStoreServer>> ServeGroupRendezvous(
    const WorkerFlags& flags, engine::GroupOptions* group);

// Every rank's page layout, in rank order: what a group sender lists in its reservations.
absl::StatusOr<std::vector<kvcache::PageLayout>> GroupPageLayouts(const model::ModelConfig& config,
                                                                  const WorkerFlags& flags);

// A non-leader rank's whole life: health server, rendezvous, steps until the leader
// shuts the group down (OK) or the group breaks (the error; the process then exits
// non-zero, so that nothing waits on a broken group).
absl::Status RunGroupRank(const WorkerFlags& flags, const std::string& name);

}  // namespace baton::worker
