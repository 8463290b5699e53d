#include "worker/slice_kv_sink.h"

#include <string>
#include <vector>

#include "baton/internal/v1/rank_kv.pb.h"
#include "common/strings.h"
#include "worker/transfer_ticket_proto.h"

namespace baton::worker {
namespace {

namespace pb = ::baton::internal::v1;

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

void SliceKvSink::OnLayerWritten(int64_t layer, std::span<const int32_t> block_table, int64_t start,
                                 int64_t count) {
  if (!started_) {
    started_ = true;
    first_put_ = Clock::now();
  }
  push_->OnLayerWritten(layer, block_table, start, count);
}

absl::Status SliceKvSink::Drain(std::span<const int32_t> block_table, bool done) {
  const Clock::time_point entered = Clock::now();
  if (absl::Status s = push_->Flush(absl::Now() + flush_timeout_); !s.ok()) {
    return absl::UnavailableError(
        StrCat("the KV transfer to the decode worker failed: ", s.message()));
  }
  const Clock::time_point flushed = Clock::now();
  if (started_) result_.transfer_seconds = Seconds(flushed - first_put_);
  result_.exposed_seconds += Seconds(flushed - entered);
  result_.bytes_sent = push_->bytes_sent();
  result_.puts = push_->puts();
  if (done) {
    result_.complete = true;
    result_.slices = push_->Checksums(block_table);
  }
  return absl::OkStatus();
}

GroupKvSink::~GroupKvSink() {
  if (ended_) return;
  pb::RankKvCall call;
  call.mutable_drop()->set_push(push_);
  (void)group_->CallRanks(call.SerializeAsString());
}

absl::Status GroupKvSink::Drain(std::span<const int32_t> block_table, bool done) {
  // Every rank waited for its own puts at the end of the step (RankKv::AfterStep).
  if (!done) return absl::OkStatus();
  const Clock::time_point entered = Clock::now();
  pb::RankKvCall call;
  call.mutable_end()->set_push(push_);
  call.mutable_end()->mutable_block_table()->Add(block_table.begin(), block_table.end());
  ended_ = true;
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> replies =
      group_->CallRanks(call.SerializeAsString());
  if (!replies.ok()) return replies.status();
  for (size_t r = 0; r < replies->size(); ++r) {
    const absl::StatusOr<std::string>& reply = (*replies)[r];
    pb::RankKvReply parsed;
    if (!reply.ok()) {
      return absl::UnavailableError(
          StrCat("the KV transfer to the decode worker failed: ", reply.status().message()));
    }
    if (!parsed.ParseFromString(*reply)) {
      return absl::DataLossError(StrCat("group rank ", r, "'s answer to PushEnd is malformed"));
    }
    for (const pb::SliceChecksum& s : parsed.slices()) result_.slices.push_back(FromProto(s));
    result_.bytes_sent += parsed.bytes_sent();
    result_.puts += parsed.puts();
  }
  const Clock::time_point now = Clock::now();
  result_.exposed_seconds += Seconds(now - entered);
  result_.transfer_seconds = Seconds(now - begun_);  // a group's: compute included
  result_.complete = true;
  return absl::OkStatus();
}

}  // namespace baton::worker
