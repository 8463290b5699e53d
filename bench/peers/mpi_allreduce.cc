// The OpenMPI side of docs/perf/parallel.md's launch-model comparison: MPI_Allreduce (sum,
// f32) on 2 ranks, timed as collectives_bench times gloo. Built and run by
// run_mpi_allreduce.sh, outside the project's build (it needs mpirun to start).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const long sizes[] = {4096, 65536, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  if (rank == 0) std::printf("%10s %6s %12s\n", "bytes", "iters", "mpi_us");
  for (long bytes : sizes) {
    std::vector<float> a(bytes / 4, 1.0f);
    const int iters = static_cast<int>(std::clamp<long>((256L << 20) / bytes, 3, 400));
    std::vector<double> rounds;
    for (int r = 0; r < 7; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) {
        MPI_Allreduce(MPI_IN_PLACE, a.data(), static_cast<int>(a.size()), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      }
      rounds.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count() /
          iters);
    }
    std::sort(rounds.begin(), rounds.end());
    if (rank == 0) std::printf("%10ld %6d %12.1f\n", bytes, iters, rounds[3]);
  }
  MPI_Finalize();
  return 0;
}
