#!/usr/bin/env bash
# Installs CUDA packages from NVIDIA's Debian 12 repository (the Dockerfile's GPU image):
# NVIDIA's own nvidia/cuda images are Ubuntu and RHEL, whose package names
# scripts/install_deps.sh does not use, so the image stays on Debian 12 and takes CUDA
# from here. Run as root.
#   scripts/install_cuda_debs.sh cuda-nvcc-13-0 cuda-cudart-dev-13-0 libcublas-dev-13-0
set -euo pipefail
(($#)) || { echo "usage: $0 PACKAGE... (e.g. cuda-cudart-13-0 libcublas-13-0)" >&2; exit 2; }
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends ca-certificates curl
keyring=$(mktemp --suffix .deb)
curl -fsSL -o "$keyring" \
  https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb
dpkg -i "$keyring"
rm -f "$keyring"
apt-get update -qq
apt-get install -y -qq --no-install-recommends "$@"
