// The NCCL Communicator on real devices: one rank per visible GPU (threads), against the
// sums computed on the host. Skips without a device.
#include "parallel/nccl_communicator.h"

#include <cuda_runtime.h>
#include <unistd.h>

#include <filesystem>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace baton::parallel {
namespace {

int Devices() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

TEST(Nccl, AllReduceGatherBroadcastOnEveryDevice) {
  const int n = Devices();
  if (n == 0) GTEST_SKIP() << "no CUDA device: GPU test skipped";
  const std::string dir =
      std::filesystem::temp_directory_path() / ("baton_nccl_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  FileStore store(dir);
  std::vector<std::string> errors(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      NcclOptions o;
      o.rank = r;
      o.size = n;
      o.device = r;
      o.store = &store;
      o.timeout = std::chrono::seconds(60);
      auto comm = ConnectNccl(o);
      if (!comm.ok()) {
        errors[r] = std::string(comm.status().message());
        return;
      }
      cudaSetDevice(r);
      const size_t count = 1 << 20;
      std::vector<float> host(count, static_cast<float>(r + 1));
      float* dev = nullptr;
      cudaMalloc(&dev, count * sizeof(float));
      cudaMemcpy(dev, host.data(), count * sizeof(float), cudaMemcpyHostToDevice);
      absl::Status s = (*comm)->AllReduceSum(std::span<float>(dev, count));
      cudaMemcpy(host.data(), dev, count * sizeof(float), cudaMemcpyDeviceToHost);
      const float want = static_cast<float>(n * (n + 1) / 2);
      if (!s.ok())
        errors[r] = std::string(s.message());
      else if (host[0] != want || host[count - 1] != want)
        errors[r] = "wrong sum";
      std::vector<std::byte> gathered(n * 16);
      std::byte* din = nullptr;
      std::byte* dout = nullptr;
      cudaMalloc(&din, 16);
      cudaMalloc(&dout, n * 16);
      cudaMemset(din, r, 16);
      s = (*comm)->AllGather(std::span<const std::byte>(din, 16),
                             std::span<std::byte>(dout, n * 16));
      cudaMemcpy(gathered.data(), dout, n * 16, cudaMemcpyDeviceToHost);
      if (s.ok()) {
        for (int k = 0; k < n; ++k) {
          if (gathered[k * 16] != static_cast<std::byte>(k)) errors[r] = "wrong gather";
        }
      }
      if (s.ok()) s = (*comm)->Barrier();
      if (!s.ok()) errors[r] = std::string(s.message());
      cudaFree(dev);
      cudaFree(din);
      cudaFree(dout);
    });
  }
  for (auto& t : ranks) t.join();
  std::filesystem::remove_all(dir);
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(Nccl, RendezvousWithoutTheOtherRankTimesOut) {
  if (Devices() == 0) GTEST_SKIP() << "no CUDA device: GPU test skipped";
  const std::string dir =
      std::filesystem::temp_directory_path() / ("baton_nccl_t" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  FileStore store(dir);
  NcclOptions o;
  o.rank = 1;  // rank 0 never publishes its id
  o.size = 2;
  o.store = &store;
  o.timeout = std::chrono::milliseconds(300);
  auto comm = ConnectNccl(o);
  EXPECT_TRUE(absl::IsDeadlineExceeded(comm.status())) << comm.status();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace baton::parallel
