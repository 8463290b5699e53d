#!/usr/bin/env bash
# OpenMPI's all-reduce on this host, 2 ranks (shared memory), for the launch-model
# comparison in docs/perf/parallel.md. Needs libopenmpi-dev and openmpi-bin (Debian);
# builds into build/peers/, never into the repository.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build/peers
mpicxx -O2 -std=c++17 bench/peers/mpi_allreduce.cc -o build/peers/mpi_allreduce
grep -m1 'model name' /proc/cpuinfo
mpirun --allow-run-as-root --oversubscribe -np 2 build/peers/mpi_allreduce
