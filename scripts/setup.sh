#!/usr/bin/env bash
# Installs every Debian package dgld needs to build, test and run.
# Idempotent: packages already present are left alone. Run as root on Debian 12.
set -euo pipefail

PACKAGES=(
  # build
  build-essential meson ninja-build pkg-config
  # libraries
  libboost-dev libboost-program-options-dev
  flatbuffers-compiler libflatbuffers-dev
  libspdlog-dev libfmt-dev
  libmetis-dev
  # dgl-partition --distributed: OpenMPI and PT-Scotch (docs/distributed-partitioning.md)
  libopenmpi-dev openmpi-bin libptscotch-dev
  libtorch-dev libgloo-dev
  nlohmann-json3-dev
  libssl-dev            # HMAC-SHA256 and random nonces for connection authentication
  zlib1g-dev
  catch2
  # the Python package dgld (python/): Debian's torch 1.13 (= libtorch-dev), pybind11, numpy; pytest for its tests
  python3-dev python3-torch python3-numpy pybind11-dev python3-pytest
  python3-pytest-timeout  # scripts/dgl_suite.sh: a deadline per DGL test item
  # fast BLAS for libtorch (Debian's default libblas.so.3 is the slow reference one)
  libopenblas0-openmp
  # launcher, multi-host tests, demo
  openssh-client openssh-server rsync iproute2 procps gnuplot-nox
  # systemd unit checks
  systemd
  # fuzzing (scripts/fuzz.sh): clang and its libFuzzer/sanitizer runtimes
  clang libclang-rt-14-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${#missing[@]} package(s): ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#PACKAGES[@]} packages already installed"
fi

# Make sure libtorch picks OpenBLAS, not the reference BLAS, when both are present.
if command -v update-alternatives >/dev/null; then
  alt=$(update-alternatives --list libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas | grep openmp | head -n1 || true)
  if [ -n "$alt" ]; then
    $SUDO update-alternatives --set libblas.so.3-x86_64-linux-gnu "$alt" >/dev/null
  fi
  alt=$(update-alternatives --list liblapack.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas | grep openmp | head -n1 || true)
  if [ -n "$alt" ]; then
    $SUDO update-alternatives --set liblapack.so.3-x86_64-linux-gnu "$alt" >/dev/null
  fi
fi
