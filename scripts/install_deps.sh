#!/usr/bin/env bash
# Installs the Debian 12 packages that Baton's build and tests need. Idempotent: it
# installs only what is missing, so a second run makes no network calls.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git python3 curl
  clang clang-format clang-tidy libclang-rt-14-dev
  libabsl-dev libpcre2-dev libutf8proc-dev nlohmann-json3-dev libcli11-dev libspdlog-dev
  libyaml-cpp-dev libxxhash-dev libssl-dev openssl protobuf-compiler libprotobuf-dev
  libgrpc++-dev protobuf-compiler-grpc libboost1.81-dev prometheus-cpp-dev libucx-dev ucx-utils
  libgloo-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  nodejs
  prometheus
  chromium  # headless, driven by puppeteer-core in tests/e2e/inspector.test.mjs
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
if ((${#missing[@]})); then
  echo "install_deps: installing ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install_deps: all Debian packages present"
fi

# npm ships with the machine's Node.js on these images; Debian's own npm package conflicts
# with it, so it is installed only where no npm exists at all.
if ! command -v npm >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends npm
fi
