# syntax=docker/dockerfile:1
# Baton's image: the tree of `cmake --install` (docs/operations.md, "The image").
#
#   docker build -t baton:latest .                               # CPU
#   docker build --build-arg CUDA=13-0 -t baton:cuda .           # CPU and --device cuda
#   docker run --rm -p 8000:8000 baton:latest                    # baton serve, bundled model
#
# Build: the same scripts and preset as CI (scripts/install_deps.sh, `cmake --preset
# release`), only the installed targets. Runtime: Debian 12 slim, the shared libraries the
# binaries load (tests/install/image_packages_test.py derives them with ldd and dpkg -S and
# fails when RUNTIME_PACKAGES differs), the tree under /usr/local, a non-root user.

# NVIDIA's CUDA version as its Debian 12 packages spell it (13-0); empty: a CPU-only image.
ARG CUDA=""

FROM debian:12 AS build
ARG CUDA
WORKDIR /src
COPY scripts/install_deps.sh scripts/install_cuda_debs.sh scripts/
RUN scripts/install_deps.sh && rm -rf /var/lib/apt/lists/*
# nvcc, the CUDA runtime and cuBLAS for the plugin (libbaton_cuda.so). Without them CMake
# finds no nvcc and builds for the CPU alone (CMakeLists.txt: CUDA is optional).
RUN if [ -n "$CUDA" ]; then \
      scripts/install_cuda_debs.sh "cuda-nvcc-$CUDA" "cuda-cudart-dev-$CUDA" \
        "libcublas-dev-$CUDA" && rm -rf /var/lib/apt/lists/*; \
    fi
COPY . .
# Installed to /opt/baton and copied to /usr/local below: the tree is relocatable.
RUN --mount=type=cache,target=/root/.cache/ccache \
    cmake --preset release \
      $([ -n "$CUDA" ] && echo "-DCMAKE_CUDA_COMPILER=/usr/local/cuda-$(echo "$CUDA" | tr - .)/bin/nvcc") && \
    cmake --build build/release -j "$(nproc)" --target baton-installed && \
    cmake --install build/release --prefix /opt/baton --strip

FROM debian:12-slim AS runtime
ARG CUDA
# What the installed binaries load, derived from ldd and dpkg -S (ibverbs-providers,
# librdmacm1: UCX's InfiniBand and RDMA CM transports, which libucs loads itself).
ARG RUNTIME_PACKAGES="ibverbs-providers libabsl20220623 libc-ares2 libc6 libfmt9 libgcc-s1 \
  libgloo0 libgrpc++1.51 libgrpc29 libhiredis0.14 libibverbs1 libnl-3-200 libnl-route-3-200 \
  libnuma1 libpcre2-8-0 libprometheus-cpp-core1.0 libprotobuf32 librdmacm1 libre2-9 \
  libspdlog1.10 libssl3 libstdc++6 libucx0 libutf8proc2 libxxhash0 libyaml-cpp0.7 zlib1g"
# What libbaton_cuda.so loads, from NVIDIA's repository (GPU image only). The driver
# (libcuda.so.1) comes from the host, through the NVIDIA container toolkit (--gpus).
ARG CUDA_RUNTIME_PACKAGES="cuda-cudart-${CUDA} libcublas-${CUDA}"
COPY scripts/install_cuda_debs.sh /tmp/
RUN apt-get update -qq && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      $RUNTIME_PACKAGES && \
    if [ -n "$CUDA" ]; then /tmp/install_cuda_debs.sh $CUDA_RUNTIME_PACKAGES; fi && \
    rm -rf /var/lib/apt/lists/* /tmp/install_cuda_debs.sh
COPY --from=build /opt/baton/ /usr/local/
# A fixed numeric id, so that Kubernetes' runAsNonRoot can check it.
RUN useradd --system --uid 10001 --user-group --no-create-home --home-dir /nonexistent baton
USER 10001:10001
# The router's HTTP (OpenAI API) and gRPC (baton.v1) ports, and the workers' metrics port
# in deploy/kubernetes (a worker's gRPC port there is 50051 too).
EXPOSE 8000 50051 9400
# No HEALTHCHECK: the image runs routers and workers on different ports and protocols,
# and Kubernetes (deploy/kubernetes) ignores it for its own probes on /health, /ready and
# gRPC health.
ENTRYPOINT ["baton"]
CMD ["serve", "--host", "0.0.0.0"]
