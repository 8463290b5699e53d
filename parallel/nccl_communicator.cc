#include "parallel/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status.h"

namespace baton::parallel {
namespace {

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, cudaStream_t stream, int rank, int size, int device,
                   std::chrono::milliseconds timeout)
      : comm_(comm),
        stream_(stream),
        rank_(rank),
        size_(size),
        device_(device),
        timeout_(timeout) {}
  ~NcclCommunicator() override {
    if (broken_.ok()) ncclCommDestroy(comm_);
    if (scratch_ != nullptr) cudaFree(scratch_);
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  const char* backend() const override { return "nccl"; }

  absl::Status AllReduceSum(std::span<float> data) override {
    return Enqueue("all-reduce", [&] {
      return ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, comm_,
                           stream_);
    });
  }
  absl::Status AllReduceSumBf16(std::span<uint16_t> data) override {
    return Enqueue("all-reduce (bf16)", [&] {
      return ncclAllReduce(data.data(), data.data(), data.size(), ncclBfloat16, ncclSum, comm_,
                           stream_);
    });
  }
  absl::Status AllGather(std::span<const std::byte> in, std::span<std::byte> out) override {
    if (out.size() != in.size() * static_cast<size_t>(size_)) {
      return absl::InvalidArgumentError("all-gather: output is not size() x input");
    }
    return Enqueue("all-gather", [&] {
      return ncclAllGather(in.data(), out.data(), in.size(), ncclUint8, comm_, stream_);
    });
  }
  absl::Status Broadcast(std::span<std::byte> data, int root) override {
    if (root < 0 || root >= size_) return absl::InvalidArgumentError("broadcast: bad root");
    return Enqueue("broadcast", [&] {
      return ncclBroadcast(data.data(), data.data(), data.size(), ncclUint8, root, comm_, stream_);
    });
  }
  absl::Status Send(std::span<const std::byte> data, int peer, uint32_t) override {
    BATON_RETURN_IF_ERROR(CheckPeer(peer));
    return Enqueue("send", [&] {
      return ncclSend(data.data(), data.size(), ncclUint8, peer, comm_, stream_);
    });
  }
  absl::Status Recv(std::span<std::byte> data, int peer, uint32_t) override {
    BATON_RETURN_IF_ERROR(CheckPeer(peer));
    return Enqueue("recv", [&] {
      return ncclRecv(data.data(), data.size(), ncclUint8, peer, comm_, stream_);
    });
  }
  // NCCL's point-to-point calls are asynchronous on the stream already; the posted forms
  // complete in stream order, which is what a pipeline stage needs.
  absl::StatusOr<std::unique_ptr<Pending>> PostSend(std::span<const std::byte> data, int peer,
                                                    uint32_t tag) override {
    BATON_RETURN_IF_ERROR(Send(data, peer, tag));
    return std::unique_ptr<Pending>(new Done());
  }
  absl::StatusOr<std::unique_ptr<Pending>> PostRecv(std::span<std::byte> data, int peer,
                                                    uint32_t tag) override {
    BATON_RETURN_IF_ERROR(Recv(data, peer, tag));
    return std::unique_ptr<Pending>(new Done());
  }
  absl::Status Barrier() override {
    if (scratch_ == nullptr) BATON_CUDA_RETURN_IF_ERROR(cudaMalloc(&scratch_, sizeof(float)));
    return AllReduceSum(std::span<float>(static_cast<float*>(scratch_), 1));
  }

 private:
  class Done : public Pending {
   public:
    absl::Status Wait() override { return absl::OkStatus(); }
  };

  absl::Status CheckPeer(int peer) const {
    if (peer < 0 || peer >= size_ || peer == rank_) {
      return absl::InvalidArgumentError(absl::StrCat("peer ", peer, " is not another rank"));
    }
    return absl::OkStatus();
  }

  // Enqueues one NCCL call and waits for the stream with the timeout, watching NCCL's
  // asynchronous errors (a peer's failure surfaces there).
  template <typename Fn>
  absl::Status Enqueue(const char* what, Fn&& fn) {
    if (!broken_.ok()) return broken_;
    BATON_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    ncclResult_t r = fn();
    if (r != ncclSuccess && r != ncclInProgress) return Fail(what, ncclGetErrorString(r), false);
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (true) {
      const cudaError_t q = cudaStreamQuery(stream_);
      if (q == cudaSuccess) return absl::OkStatus();
      if (q != cudaErrorNotReady) return Fail(what, cudaGetErrorString(q), false);
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        return Fail(what, ncclGetErrorString(async), false);
      }
      if (std::chrono::steady_clock::now() >= deadline) return Fail(what, "timed out", true);
      std::this_thread::yield();
    }
  }

  absl::Status Fail(const char* what, const char* why, bool timed_out) {
    ncclCommAbort(comm_);  // unblocks the stream; the communicator is gone
    const std::string text =
        absl::StrCat("nccl rank ", rank_, "/", size_, ": ", what, " failed: ", why,
                     " (a rank of the group died, hung or left)");
    broken_ = timed_out ? absl::DeadlineExceededError(text) : absl::UnavailableError(text);
    return broken_;
  }

  ncclComm_t comm_;
  cudaStream_t stream_;
  int rank_, size_, device_;
  std::chrono::milliseconds timeout_;
  absl::Status broken_;
  void* scratch_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> ConnectNccl(const NcclOptions& o) {
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size || o.store == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl: rank ", o.rank, " of ", o.size, " (and a store) is not a group"));
  }
  BATON_CUDA_RETURN_IF_ERROR(cudaSetDevice(o.device));
  ncclUniqueId id;
  const std::string key = absl::StrCat(o.prefix, "/nccl_unique_id");
  if (o.rank == 0) {
    if (ncclGetUniqueId(&id) != ncclSuccess) return absl::InternalError("ncclGetUniqueId failed");
    BATON_RETURN_IF_ERROR(o.store->Set(key, std::string_view(id.internal, sizeof(id.internal))));
  } else {
    BATON_ASSIGN_OR_RETURN(std::string v, o.store->Get(key, o.timeout));
    if (v.size() != sizeof(id.internal)) return absl::DataLossError("nccl: malformed unique id");
    std::memcpy(id.internal, v.data(), v.size());
  }
  // Non-blocking init, so that a rank that never shows up is a timeout, not a hang.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm;
  ncclResult_t r = ncclCommInitRankConfig(&comm, o.size, id, o.rank, &config);
  const auto deadline = std::chrono::steady_clock::now() + o.timeout;
  while (r == ncclInProgress || r == ncclSuccess) {
    ncclResult_t state = ncclInProgress;
    ncclCommGetAsyncError(comm, &state);
    if (state == ncclSuccess) break;
    if (state != ncclInProgress) {
      r = state;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ncclCommAbort(comm);
      return absl::DeadlineExceededError(absl::StrCat("nccl rank ", o.rank, "/", o.size,
                                                      ": the group did not form within ",
                                                      o.timeout.count(), " ms"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (r != ncclSuccess && r != ncclInProgress) {
    return absl::UnavailableError(absl::StrCat("nccl init: ", ncclGetErrorString(r)));
  }
  cudaStream_t stream;
  BATON_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(comm, stream, o.rank, o.size, o.device, o.timeout));
}

}  // namespace baton::parallel
