#include "engine/parallel/worker_group.h"

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "common/status.h"
#include "common/strings.h"
#include "engine/model_runner.h"
#include "parallel/gloo_communicator.h"
#include "spdlog/spdlog.h"

namespace baton::engine {
namespace {

using parallel::AsBytes;
using parallel::AsWritableBytes;

// A step message: a fixed-size first broadcast that holds small plans whole (a decode
// step of a few dozen sequences), and a second one for the rest of a large plan.
constexpr size_t kFrameBytes = 4096;
constexpr uint32_t kStepMagic = 0x42535450;  // "BSTP"
constexpr size_t kMaxStepBytes = size_t{1} << 29;
struct FrameHeader {
  uint32_t magic;
  uint32_t op;
  uint64_t size;
};
constexpr size_t kInlineBytes = kFrameBytes - sizeof(FrameHeader);

// The group's setup, broadcast once by the leader. Every rank's pool takes the leader's
// page count, block size and KV element type, whatever its own flags said.
constexpr int64_t kSetupMagic = 0x4253455455500002;  // "BSETUP", version 2
struct Setup {
  int64_t magic = kSetupMagic;
  int64_t num_pages = 0;
  int64_t block_size = 0;
  int64_t group_size = 0;
  char kv_dtype[16] = {};  // the layout's dtype, NUL-padded
};

// The dtype the setup carries; empty when it is not NUL-terminated.
std::string SetupDtype(const Setup& setup) {
  const char* end = std::find(std::begin(setup.kv_dtype), std::end(setup.kv_dtype), '\0');
  if (end == std::end(setup.kv_dtype)) return "";
  return std::string(std::begin(setup.kv_dtype), end);
}

absl::StatusOr<GroupStep> ReceiveStep(parallel::Communicator* world) {
  std::vector<std::byte> frame(kFrameBytes);
  BATON_RETURN_IF_ERROR(world->Broadcast(frame, 0));
  FrameHeader h;
  std::memcpy(&h, frame.data(), sizeof(h));
  if (h.magic != kStepMagic || h.size > kMaxStepBytes || h.op < 1 || h.op > 4) {
    return absl::DataLossError("worker group: the leader's step message is malformed");
  }
  std::string body(h.size, '\0');
  const size_t inline_part = std::min<size_t>(h.size, kInlineBytes);
  std::memcpy(body.data(), frame.data() + sizeof(h), inline_part);
  if (h.size > kInlineBytes) {
    BATON_RETURN_IF_ERROR(world->Broadcast(
        std::as_writable_bytes(std::span<char>(body.data() + kInlineBytes, h.size - kInlineBytes)),
        0));
  }
  return DecodeGroupStep(static_cast<StepOp>(h.op), body);
}

// A rank's answer to a kCall step, sent to the leader: this header, then `size` bytes (the
// reply, or the error's message).
constexpr uint32_t kReplyMagic = 0x42525052;  // "BRPR"
constexpr uint32_t kReplyTag = 1u << 21;
struct ReplyHeader {
  uint32_t magic = kReplyMagic;
  int32_t code = 0;  // absl::StatusCode
  uint64_t size = 0;
};

absl::Status SendReply(parallel::Communicator* world, const absl::StatusOr<std::string>& reply) {
  const std::string body = reply.ok() ? *reply : std::string(reply.status().message());
  ReplyHeader h;
  h.code = static_cast<int32_t>(reply.status().code());
  h.size = body.size();
  BATON_RETURN_IF_ERROR(world->Send(AsBytes(std::span<const ReplyHeader>(&h, 1)), 0, kReplyTag));
  if (body.empty()) return absl::OkStatus();
  return world->Send(std::as_bytes(std::span<const char>(body.data(), body.size())), 0, kReplyTag);
}

absl::StatusOr<absl::StatusOr<std::string>> RecvReply(parallel::Communicator* world, int rank) {
  ReplyHeader h;
  BATON_RETURN_IF_ERROR(
      world->Recv(AsWritableBytes(std::span<ReplyHeader>(&h, 1)), rank, kReplyTag));
  if (h.magic != kReplyMagic || h.size > kMaxStepBytes || h.code < 0 || h.code > 16) {
    return absl::DataLossError(StrCat("worker group: rank ", rank, "'s reply is malformed"));
  }
  std::string body(h.size, '\0');
  if (h.size > 0) {
    BATON_RETURN_IF_ERROR(world->Recv(
        std::as_writable_bytes(std::span<char>(body.data(), body.size())), rank, kReplyTag));
  }
  if (h.code == 0) return absl::StatusOr<std::string>(std::move(body));
  return absl::StatusOr<std::string>(
      absl::Status(static_cast<absl::StatusCode>(h.code), StrCat("group rank ", rank, ": ", body)));
}

absl::StatusOr<std::string> CallLocal(RankKv* kv, std::string_view request) {
  if (kv == nullptr) {
    return absl::UnimplementedError("this rank takes no part in KV transfers");
  }
  return kv->Call(request);
}

int64_t CountTokens(std::span<const SequenceInput> batch) {
  int64_t n = 0;
  for (const SequenceInput& s : batch) n += static_cast<int64_t>(s.tokens.size());
  return n;
}

}  // namespace

model::RankPlacement PlacementOf(const GroupOptions& o) {
  return model::RankPlacement{o.rank % o.tp_size, o.tp_size, o.rank / o.tp_size, o.pp_size};
}

absl::StatusOr<GroupComms> ConnectGroup(const GroupOptions& o) {
  if (o.tp_size < 1 || o.pp_size < 1 || o.rank < 0 || o.rank >= o.tp_size * o.pp_size) {
    return absl::InvalidArgumentError(StrCat("--group-rank ", o.rank, " is outside a group of ",
                                             o.tp_size, " x ", o.pp_size, " ranks"));
  }
  GroupComms comms;
  comms.at = PlacementOf(o);
  comms.world_rank = o.rank;
  parallel::GlooOptions g;
  g.store = o.store;
  g.address = o.address;
  g.timeout = o.timeout;
  g.rendezvous_timeout = o.rendezvous_timeout;
  g.rank = o.rank;
  g.size = o.tp_size * o.pp_size;
  g.prefix = StrCat(o.name, "/world");
  BATON_ASSIGN_OR_RETURN(comms.world, parallel::ConnectGloo(g));
  if (o.tp_size > 1) {
    g.rank = comms.at.tp_rank;
    g.size = o.tp_size;
    g.prefix = StrCat(o.name, "/tp", comms.at.pp_rank);
    BATON_ASSIGN_OR_RETURN(comms.tp, parallel::ConnectGloo(g));
  }
  return comms;
}

StageRunner::StageRunner(const model::Model& model, const model::Shard& shard,
                         kvcache::KvPool* pool, ThreadPool* threads, GroupComms* comms)
    : config_(model.config()),
      shard_(shard),
      pool_(pool),
      comms_(comms),
      forward_(model, shard, threads, comms->tp.get()) {}

absl::Status StageRunner::Run(const GroupStep& plan, ForwardOutput* out) {
  const std::vector<SequenceInput> inputs = plan.Inputs();
  BATON_RETURN_IF_ERROR(forward_.Validate(inputs, pool_->num_blocks(), pool_->layout().block_size));
  const bool pushes =
      rank_kv_ != nullptr && std::any_of(plan.seqs.begin(), plan.seqs.end(),
                                         [](const GroupStep::Seq& s) { return s.kv_push != 0; });
  if (!pushes) return RunStage(plan, inputs, out);
  forward_.set_layer_kv_hook([this](int64_t layer, std::span<const SequenceInput> batch) {
    rank_kv_->OnLayerWritten(layer, batch);
  });
  absl::Status ran = RunStage(plan, inputs, out);
  forward_.set_layer_kv_hook(nullptr);
  rank_kv_->AfterStep();
  return ran;
}

absl::Status StageRunner::RunStage(const GroupStep& plan, const std::vector<SequenceInput>& inputs,
                                   ForwardOutput* out) {
  const model::KvPages kv = KvPagesOf(pool_);
  const int tp = shard_.at.tp_size;
  const int pp = shard_.at.pp_size;
  parallel::Communicator* world = comms_->world.get();
  if (pp == 1) {
    hidden_.resize(1);
    return forward_.Forward(inputs, kv, &hidden_[0], out);
  }
  const int64_t hidden = config_.hidden_size;
  const int64_t vocab = config_.vocab_size;
  const int micro = static_cast<int>(plan.micro_ends.size());
  const int prev = comms_->world_rank - tp, next = comms_->world_rank + tp;
  const int last_stage_head = (pp - 1) * tp;  // its tensor-parallel rank 0 returns the logits
  hidden_.resize(micro);
  micro_out_.resize(micro);

  std::vector<std::span<const SequenceInput>> parts;
  for (int m = 0, begin = 0; m < micro; begin = plan.micro_ends[m], ++m) {
    parts.push_back(
        std::span<const SequenceInput>(inputs).subspan(begin, plan.micro_ends[m] - begin));
  }
  // The leader posts its receives of the logits first, so that the last stage never waits
  // for it to be done with its own micro-batches.
  std::vector<std::unique_ptr<parallel::Pending>> logits_in(micro);
  std::vector<int64_t> first_row;
  if (comms_->world_rank == 0) {
    for (int m = 0; m < micro; ++m) {
      const int64_t rows = model::PlanLogitRows(parts[m], &first_row);
      micro_out_[m].logits.resize(rows * vocab);
      if (rows == 0) continue;
      BATON_ASSIGN_OR_RETURN(
          logits_in[m], world->PostRecv(AsWritableBytes(std::span<float>(micro_out_[m].logits)),
                                        last_stage_head, kLogitsTag + m));
    }
  }
  std::vector<std::unique_ptr<parallel::Pending>> sends;
  absl::Status failed;
  for (int m = 0; m < micro && failed.ok(); ++m) {
    std::vector<float>& h = hidden_[m];
    h.resize(CountTokens(parts[m]) * hidden);
    if (!shard_.first_stage()) {
      failed = world->Recv(AsWritableBytes(std::span<float>(h)), prev, m);
      if (!failed.ok()) break;
    }
    failed = forward_.Forward(parts[m], kv, &h, &micro_out_[m]);
    if (!failed.ok()) break;
    if (!shard_.last_stage()) {
      auto sent = world->PostSend(AsBytes(std::span<const float>(h)), next, m);
      if (!sent.ok())
        failed = sent.status();
      else
        sends.push_back(std::move(*sent));
    } else if (shard_.at.tp_rank == 0 && !micro_out_[m].logits.empty()) {
      auto sent =
          world->PostSend(AsBytes(std::span<const float>(micro_out_[m].logits)), 0, kLogitsTag + m);
      if (!sent.ok())
        failed = sent.status();
      else
        sends.push_back(std::move(*sent));
    }
  }
  for (auto& s : sends) {
    absl::Status done = s->Wait();
    if (failed.ok()) failed = done;
  }
  for (auto& r : logits_in) {
    if (r == nullptr) continue;
    absl::Status done = r->Wait();
    if (failed.ok()) failed = done;
  }
  BATON_RETURN_IF_ERROR(failed);
  if (comms_->world_rank != 0) return absl::OkStatus();
  // The leader lays the micro-batches' rows end to end: the batch's order.
  out->vocab_size = vocab;
  const int64_t rows = model::PlanLogitRows(inputs, &out->first_row);
  out->logits.resize(rows * vocab);
  size_t at = 0;
  for (int m = 0; m < micro; ++m) {
    std::copy(micro_out_[m].logits.begin(), micro_out_[m].logits.end(), out->logits.begin() + at);
    at += micro_out_[m].logits.size();
  }
  BATON_CHECK(at == out->logits.size());
  return absl::OkStatus();
}

GroupBackend::GroupBackend(const model::Model& model, const GroupOptions& options, GroupComms comms,
                           kvcache::KvPool* pool, ThreadPool* threads,
                           std::unique_ptr<RankKv> rank_kv)
    : options_(options),
      comms_(std::move(comms)),
      pool_(pool),
      rank_kv_(std::move(rank_kv)),
      stage_(model, *model::PlanShard(model.config(), comms_.at), pool, threads, &comms_),
      name_(StrCat("cpu tp=", options.tp_size, " pp=", options.pp_size)) {
  stage_.set_rank_kv(rank_kv_.get());
}

absl::StatusOr<std::unique_ptr<GroupBackend>> GroupBackend::Create(
    const model::Model& model, const GroupOptions& options, GroupComms comms, kvcache::KvPool* pool,
    ThreadPool* threads, std::unique_ptr<RankKv> rank_kv) {
  BATON_CHECK(comms.world_rank == 0);
  BATON_RETURN_IF_ERROR(model::PlanShard(model.config(), comms.at).status());
  std::unique_ptr<GroupBackend> b(
      new GroupBackend(model, options, std::move(comms), pool, threads, std::move(rank_kv)));
  Setup setup;
  setup.num_pages = pool->num_blocks();
  setup.block_size = pool->layout().block_size;
  setup.group_size = options.tp_size * options.pp_size;
  const std::string& dtype = pool->layout().dtype;
  BATON_CHECK(dtype.size() < sizeof(setup.kv_dtype));  // the pool took only bf16 or f32
  std::copy(dtype.begin(), dtype.end(), setup.kv_dtype);
  BATON_RETURN_IF_ERROR(
      b->comms_.world->Broadcast(AsWritableBytes(std::span<Setup>(&setup, 1)), 0));
  b->last_sent_ = std::chrono::steady_clock::now();
  b->keepalive_ = std::thread([p = b.get()] { p->KeepAlive(); });
  return b;
}

GroupBackend::~GroupBackend() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    if (broken_.ok()) (void)SendLocked(StepOp::kShutdown, "");
  }
  stop_cv_.notify_all();
  if (keepalive_.joinable()) keepalive_.join();
}

absl::Status GroupBackend::health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

absl::Status GroupBackend::SendLocked(StepOp op, const std::string& body) {
  if (!broken_.ok()) return broken_;
  std::vector<std::byte> frame(kFrameBytes);
  const FrameHeader h{kStepMagic, static_cast<uint32_t>(op), body.size()};
  std::memcpy(frame.data(), &h, sizeof(h));
  std::memcpy(frame.data() + sizeof(h), body.data(), std::min(body.size(), kInlineBytes));
  absl::Status s = comms_.world->Broadcast(frame, 0);
  if (s.ok() && body.size() > kInlineBytes) {
    std::string rest = body.substr(kInlineBytes);
    s = comms_.world->Broadcast(std::as_writable_bytes(std::span<char>(rest.data(), rest.size())),
                                0);
  }
  last_sent_ = std::chrono::steady_clock::now();
  if (!s.ok()) broken_ = absl::UnavailableError(StrCat("worker group broke: ", s.message()));
  return broken_;
}

void GroupBackend::KeepAlive() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    stop_cv_.wait_for(lock, options_.keepalive / 4);
    if (stop_ || !broken_.ok()) continue;
    if (std::chrono::steady_clock::now() - last_sent_ < options_.keepalive) continue;
    if (absl::Status s = SendLocked(StepOp::kKeepAlive, ""); !s.ok()) {
      spdlog::error("{}", std::string(s.message()));
    }
  }
}

absl::StatusOr<std::vector<absl::StatusOr<std::string>>> GroupBackend::CallRanks(
    std::string_view request) {
  std::lock_guard<std::mutex> lock(mu_);
  BATON_RETURN_IF_ERROR(SendLocked(StepOp::kCall, std::string(request)));
  std::vector<absl::StatusOr<std::string>> replies;
  replies.push_back(CallLocal(rank_kv_.get(), request));
  for (int r = 1; r < size(); ++r) {
    absl::StatusOr<absl::StatusOr<std::string>> reply = RecvReply(comms_.world.get(), r);
    if (!reply.ok()) {
      broken_ = absl::UnavailableError(StrCat("worker group broke: ", reply.status().message()));
      return broken_;
    }
    replies.push_back(*std::move(reply));
  }
  return replies;
}

absl::Status GroupBackend::Forward(std::span<const SequenceInput> batch, ForwardOutput* out) {
  BATON_RETURN_IF_ERROR(
      stage_.forward().Validate(batch, pool_->num_blocks(), pool_->layout().block_size));
  const int micro = options_.micro_batches > 0 ? options_.micro_batches : 2 * options_.pp_size;
  const GroupStep plan = PlanGroupStep(batch, options_.pp_size > 1 ? micro : 1);
  std::lock_guard<std::mutex> lock(mu_);
  BATON_RETURN_IF_ERROR(SendLocked(StepOp::kForward, EncodeGroupStep(plan)));
  absl::Status ran = stage_.Run(plan, out);
  if (!ran.ok()) {
    broken_ = absl::UnavailableError(StrCat("worker group broke: ", ran.message()));
    return broken_;
  }
  return absl::OkStatus();
}

std::function<absl::StatusOr<std::unique_ptr<Backend>>(kvcache::KvPool*, ThreadPool*)>
MakeGroupBackendFactory(const model::Model* model, GroupOptions options,
                        std::shared_ptr<GroupComms> comms, RankKvSetup kv,
                        std::function<void(GroupBackend*)> created) {
  return [model, options, comms, kv, created](
             kvcache::KvPool* pool,
             ThreadPool* threads) -> absl::StatusOr<std::unique_ptr<Backend>> {
    std::unique_ptr<RankKv> rank_kv;
    if (kv.make) {
      BATON_ASSIGN_OR_RETURN(rank_kv, kv.make(pool));
    }
    BATON_ASSIGN_OR_RETURN(auto backend, GroupBackend::Create(*model, options, std::move(*comms),
                                                              pool, threads, std::move(rank_kv)));
    if (created) created(backend.get());
    return std::unique_ptr<Backend>(std::move(backend));
  };
}

absl::Status RunGroupFollower(const model::Model& model, const GroupOptions& options,
                              GroupComms* comms, ThreadPool* threads,
                              const std::function<void()>& on_ready, const RankKvSetup& kv) {
  BATON_ASSIGN_OR_RETURN(model::Shard shard, model::PlanShard(model.config(), comms->at));
  Setup setup;
  BATON_RETURN_IF_ERROR(comms->world->Broadcast(AsWritableBytes(std::span<Setup>(&setup, 1)), 0));
  if (setup.magic != kSetupMagic || setup.group_size != options.tp_size * options.pp_size ||
      setup.num_pages < 1 || setup.block_size < 1) {
    return absl::FailedPreconditionError(StrCat(
        "worker group: the leader's setup does not match this rank (group of ", setup.group_size,
        ", this rank expects ", options.tp_size * options.pp_size,
        "); start every rank with the same --tensor-parallel-size and --pipeline-parallel-size"));
  }
  const std::string dtype = SetupDtype(setup);
  if (absl::Status ok = kvcache::CheckKvCacheDtype(dtype); !ok.ok()) {
    return absl::FailedPreconditionError(
        StrCat("worker group: the leader's KV cache dtype does not fit this rank: ", ok.message()));
  }
  const kvcache::PageLayout layout = PageLayoutFor(shard, model.config(), setup.block_size, dtype);
  void* memory = nullptr;
  if (kv.pool_memory) {
    BATON_ASSIGN_OR_RETURN(memory, kv.pool_memory(static_cast<size_t>(layout.page_bytes()) *
                                                  static_cast<size_t>(setup.num_pages)));
  }
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<kvcache::KvPool> pool,
                         kvcache::KvPool::Create(layout, setup.num_pages, memory));
  std::unique_ptr<RankKv> rank_kv;
  if (kv.make) {
    BATON_ASSIGN_OR_RETURN(rank_kv, kv.make(pool.get()));
  }
  StageRunner stage(model, shard, pool.get(), threads, comms);
  stage.set_rank_kv(rank_kv.get());
  if (on_ready) on_ready();
  ForwardOutput scratch;
  while (true) {
    BATON_ASSIGN_OR_RETURN(GroupStep plan, ReceiveStep(comms->world.get()));
    if (plan.op == StepOp::kShutdown) return absl::OkStatus();
    if (plan.op == StepOp::kKeepAlive) continue;
    if (plan.op == StepOp::kCall) {
      BATON_RETURN_IF_ERROR(SendReply(comms->world.get(), CallLocal(rank_kv.get(), plan.call)));
      continue;
    }
    BATON_RETURN_IF_ERROR(stage.Run(plan, &scratch));
  }
}

}  // namespace baton::engine
