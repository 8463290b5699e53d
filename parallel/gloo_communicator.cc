#include "parallel/gloo_communicator.h"

#include <cstring>
#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/types.h"

namespace baton::parallel {
namespace {

// Point-to-point messages use a slot prefix no gloo collective uses (gloo/types.h).
constexpr uint8_t kSendRecvSlotPrefix = 0x40;

// gloo's rendezvous wants its own store type, and reports failure by exception.
class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(parallel::Store* store, std::chrono::milliseconds timeout)
      : store_(store), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    absl::Status s = store_->Set(key, std::string_view(data.data(), data.size()));
    if (!s.ok()) throw gloo::IoException(std::string(s.message()));
  }
  std::vector<char> get(const std::string& key) override {
    absl::StatusOr<std::string> v = store_->Get(key, timeout_);
    if (!v.ok()) throw gloo::IoException(std::string(v.status().message()));
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    for (const std::string& key : keys) {
      absl::StatusOr<std::string> v = store_->Get(key, timeout);
      if (!v.ok()) throw gloo::IoException(std::string(v.status().message()));
    }
  }

 private:
  parallel::Store* store_;
  std::chrono::milliseconds timeout_;
};

// f32 <-> bf16 with round to nearest even (NaN stays NaN).
float Bf16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

struct Bf16 {
  uint16_t bits;
};

void SumBf16(void* c, const void* a, const void* b, size_t n) {
  auto* out = static_cast<uint16_t*>(c);
  const auto* x = static_cast<const uint16_t*>(a);
  const auto* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = FloatToBf16(Bf16ToFloat(x[i]) + Bf16ToFloat(y[i]));
}

class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<gloo::Context> context, std::string name,
                   std::chrono::milliseconds timeout)
      : context_(std::move(context)), name_(std::move(name)), timeout_(timeout) {}

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  const char* backend() const override { return "gloo"; }

  absl::Status AllReduceSum(std::span<float> data) override {
    if (size() == 1 || data.empty()) return Precheck();
    if (size() > 2) return GatherAndSum(data.data(), data.size());
    return Run("all-reduce", [&] {
      gloo::AllreduceOptions opts(context_);
      opts.setOutput(data.data(), data.size());
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      opts.setTimeout(timeout_);
      gloo::allreduce(opts);
    });
  }

  absl::Status AllReduceSumBf16(std::span<uint16_t> data) override {
    if (size() == 1 || data.empty()) return Precheck();
    if (size() > 2) return GatherAndSumBf16(data.data(), data.size());
    return Run("all-reduce (bf16)", [&] {
      gloo::AllreduceOptions opts(context_);
      opts.setOutput(reinterpret_cast<Bf16*>(data.data()), data.size());
      opts.setReduceFunction(&SumBf16);
      opts.setTimeout(timeout_);
      gloo::allreduce(opts);
    });
  }

  absl::Status AllGather(std::span<const std::byte> in, std::span<std::byte> out) override {
    if (out.size() != in.size() * static_cast<size_t>(size())) {
      return absl::InvalidArgumentError(absl::StrCat("all-gather: output holds ", out.size(),
                                                     " bytes, want ", size(), " x ", in.size()));
    }
    if (size() == 1 || in.empty()) {
      std::memcpy(out.data(), in.data(), in.size());
      return Precheck();
    }
    return Run("all-gather", [&] {
      gloo::AllgatherOptions opts(context_);
      opts.setInput(const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(in.data())), in.size());
      opts.setOutput(reinterpret_cast<uint8_t*>(out.data()), out.size());
      opts.setTimeout(timeout_);
      gloo::allgather(opts);
    });
  }

  absl::Status Broadcast(std::span<std::byte> data, int root) override {
    if (root < 0 || root >= size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("broadcast: root ", root, " is outside the group of ", size()));
    }
    if (size() == 1 || data.empty()) return Precheck();
    return Run("broadcast", [&] {
      gloo::BroadcastOptions opts(context_);
      opts.setOutput(reinterpret_cast<uint8_t*>(data.data()), data.size());
      opts.setRoot(root);
      opts.setTimeout(timeout_);
      gloo::broadcast(opts);
    });
  }

  absl::Status Send(std::span<const std::byte> data, int peer, uint32_t tag) override {
    BATON_ASSIGN_OR_RETURN(auto pending, PostSend(data, peer, tag));
    return pending->Wait();
  }

  absl::Status Recv(std::span<std::byte> data, int peer, uint32_t tag) override {
    BATON_ASSIGN_OR_RETURN(auto pending, PostRecv(data, peer, tag));
    return pending->Wait();
  }

  absl::StatusOr<std::unique_ptr<Pending>> PostSend(std::span<const std::byte> data, int peer,
                                                    uint32_t tag) override {
    return Post(const_cast<std::byte*>(data.data()), data.size(), peer, tag, /*send=*/true);
  }

  absl::StatusOr<std::unique_ptr<Pending>> PostRecv(std::span<std::byte> data, int peer,
                                                    uint32_t tag) override {
    return Post(data.data(), data.size(), peer, tag, /*send=*/false);
  }

  absl::Status Barrier() override {
    if (size() == 1) return Precheck();
    return Run("barrier", [&] {
      gloo::BarrierOptions opts(context_);
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
    });
  }

 private:
  class GlooPending : public Pending {
   public:
    GlooPending(GlooCommunicator* owner, std::unique_ptr<gloo::transport::UnboundBuffer> buf,
                bool send)
        : owner_(owner), buf_(std::move(buf)), send_(send) {}
    absl::Status Wait() override {
      return owner_->Run(send_ ? "send" : "recv", [&] {
        const bool done =
            send_ ? buf_->waitSend(owner_->timeout_) : buf_->waitRecv(owner_->timeout_);
        if (!done) throw gloo::IoException("aborted");
      });
    }

   private:
    GlooCommunicator* owner_;
    std::unique_ptr<gloo::transport::UnboundBuffer> buf_;
    bool send_;
  };

  absl::StatusOr<std::unique_ptr<Pending>> Post(std::byte* data, size_t bytes, int peer,
                                                uint32_t tag, bool send) {
    BATON_RETURN_IF_ERROR(CheckPeer(peer));
    std::unique_ptr<gloo::transport::UnboundBuffer> buf;
    BATON_RETURN_IF_ERROR(Run(send ? "send" : "recv", [&] {
      buf = context_->createUnboundBuffer(data, bytes);
      if (send) {
        buf->send(peer, gloo::Slot::build(kSendRecvSlotPrefix, tag));
      } else {
        buf->recv(peer, gloo::Slot::build(kSendRecvSlotPrefix, tag));
      }
    }));
    return std::unique_ptr<Pending>(new GlooPending(this, std::move(buf), send));
  }

  absl::Status CheckPeer(int peer) const {
    if (peer < 0 || peer >= size() || peer == rank()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": peer ", peer, " is not another rank of the group of ", size()));
    }
    return absl::OkStatus();
  }

  absl::Status Precheck() const { return broken_; }

  // Runs one gloo call; gloo reports a timeout or a lost peer by exception. After one, the
  // context's pairs are in an unknown state, so the communicator refuses further calls.
  template <typename Fn>
  absl::Status Run(const char* what, Fn&& fn) {
    if (!broken_.ok()) return broken_;
    try {
      fn();
      return absl::OkStatus();
    } catch (const std::exception& e) {
      const std::string msg = e.what();
      const bool timed_out =
          msg.find("imed out") != std::string::npos || msg.find("imeout") != std::string::npos;
      const std::string text =
          absl::StrCat(name_, " rank ", rank(), "/", size(), ": ", what, " failed",
                       timed_out ? absl::StrCat(" after ", timeout_.count(), " ms") : "", ": ", msg,
                       " (a rank of the group died, hung or left)");
      broken_ = timed_out ? absl::DeadlineExceededError(text) : absl::UnavailableError(text);
      return broken_;
    }
  }

  // More than two ranks: gloo's ring sums in an order that depends on the element's
  // chunk; gather everything and sum in rank order instead (one step of latency, and
  // size() times the bytes, which for the decode-sized messages of TP is small).
  absl::Status GatherAndSum(float* data, size_t n) {
    scratch_.resize(n * size() * sizeof(float));
    BATON_RETURN_IF_ERROR(AllGather(std::as_bytes(std::span<const float>(data, n)),
                                    std::as_writable_bytes(std::span<std::byte>(scratch_))));
    const auto* all = reinterpret_cast<const float*>(scratch_.data());
    for (size_t i = 0; i < n; ++i) {
      float s = all[i];
      for (int r = 1; r < size(); ++r) s += all[r * n + i];
      data[i] = s;
    }
    return absl::OkStatus();
  }
  absl::Status GatherAndSumBf16(uint16_t* data, size_t n) {
    scratch_.resize(n * size() * sizeof(uint16_t));
    BATON_RETURN_IF_ERROR(AllGather(std::as_bytes(std::span<const uint16_t>(data, n)),
                                    std::as_writable_bytes(std::span<std::byte>(scratch_))));
    const auto* all = reinterpret_cast<const uint16_t*>(scratch_.data());
    for (size_t i = 0; i < n; ++i) {
      uint16_t s = all[i];
      for (int r = 1; r < size(); ++r)
        s = FloatToBf16(Bf16ToFloat(s) + Bf16ToFloat(all[r * n + i]));
      data[i] = s;
    }
    return absl::OkStatus();
  }

  std::shared_ptr<gloo::Context> context_;
  std::string name_;
  std::chrono::milliseconds timeout_;
  absl::Status broken_;
  std::vector<std::byte> scratch_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> ConnectGloo(const GlooOptions& options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("group rank ", options.rank, " is outside a group of size ", options.size));
  }
  if (options.store == nullptr) return absl::InvalidArgumentError("gloo: no rendezvous store");
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.address;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.size);
    const std::chrono::milliseconds meet =
        options.rendezvous_timeout.count() > 0 ? options.rendezvous_timeout : options.timeout;
    context->setTimeout(meet);
    GlooStoreAdapter adapter(options.store, meet);
    gloo::rendezvous::PrefixStore prefixed(options.prefix, adapter);
    context->connectFullMesh(prefixed, device);
    context->setTimeout(options.timeout);
    return std::unique_ptr<Communicator>(new GlooCommunicator(
        std::move(context), absl::StrCat("group '", options.prefix, "'"), options.timeout));
  } catch (const std::exception& e) {
    return absl::DeadlineExceededError(absl::StrCat(
        "group '", options.prefix, "' rank ", options.rank, "/", options.size,
        ": rendezvous failed within ",
        (options.rendezvous_timeout.count() > 0 ? options.rendezvous_timeout : options.timeout)
            .count(),
        " ms: ", e.what()));
  }
}

}  // namespace baton::parallel
