#!/usr/bin/env bash
# Builds gpu-bench, the GPU benchmark program (agent/gpu-bench/src, docs/gpu-benchmark.md):
# kernels.cu compiled by nvcc into one fatbin with SASS for every GPU generation from compute
# capability 7.5 that this nvcc offers (sm_75 sm_80 sm_86 sm_89 sm_90 sm_100 sm_120) plus PTX
# for compute_100 (JIT-compiled by the driver on any later GPU), and the compatibility PTX for
# drivers older than the toolkit (compute_75 and compute_80, declared at an old PTX ISA and
# checked by ptxas at that version), embedded in a host program built with g++ that loads the
# driver's libcuda.so.1 with dlopen: no CUDA runtime library is needed to run it.
#
# Usage: scripts/build-gpu-bench.sh [--rootfs DIR]
# Prints the binary's path. With --rootfs, DIR becomes the benchmark image's root file system:
# /gpu-bench and the glibc pieces that it and the driver's libcuda.so.1 load (ldd; libcuda itself
# is brought in by the NVIDIA Container Toolkit when the container starts). Files only: whoever
# makes the image adds /tmp (gf-agent, agent/src/benchmark/gpu-bench-image.ts).
#
# Compiling takes minutes of CPU on a small machine, so the binary is cached by a hash of its
# sources, this script and the compilers' versions (GF_GPU_BENCH_CACHE, default
# ~/.cache/gpufarm/gpu-bench): an unchanged program is not compiled again, in any checkout.
# Without nvcc, a cached binary of the same sources is used. NVCC picks the toolkit (default:
# nvcc on PATH, else /usr/local/cuda/bin/nvcc). A driver of the toolkit's family (R580 for CUDA
# 13) loads the fatbin; an older one JIT-compiles the compatibility PTX (docs/gpu-benchmark.md).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/node-rootfs.sh
. "$ROOT/scripts/lib/node-rootfs.sh"
SRC="$ROOT/agent/gpu-bench/src"
CACHE="${GF_GPU_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufarm/gpu-bench}"
# SASS for these generations: Turing, Ampere (A100; RTX 30, A10, A40), Ada, Hopper, Blackwell
# (B200; RTX 50, RTX PRO). Each runs on later GPUs of its major version (sm_86 on 8.7, sm_120 on 12.1).
WANTED_SASS=(75 80 86 89 90 100 120)
# The compatibility PTX: the kernels compiled for compute_75 (no cp.async) and compute_80, their
# `.version` lowered to the oldest PTX ISA whose rules the code meets, so that a driver of an older
# family, whose JIT compiler knows ISAs up to its own CUDA version, can compile them. ptxas checks
# the code against that ISA here. ISA 7.0 came with CUDA 11.0 (NVIDIA's PTX ISA release history).
COMPAT_ARCHS=(75 80)
COMPAT_PTX_ISA=7.0
COMPAT_CUDA=11000

ROOTFS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rootfs) ROOTFS=$(realpath -m "$2"); shift 2 ;;
    *) printf 'usage: %s [--rootfs DIR]\n' "$0" >&2; exit 2 ;;
  esac
done

say() { printf 'build-gpu-bench: %s\n' "$*" >&2; }
fail() { printf 'build-gpu-bench: %s\n' "$*" >&2; exit 1; }

NVCC="${NVCC:-$(command -v nvcc || true)}"
[ -n "$NVCC" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || NVCC=/usr/local/cuda/bin/nvcc
source_hash=$(cat "${BASH_SOURCE[0]}" "$SRC"/* | sha256sum | cut -c1-16)

binary=""
if [ -n "$NVCC" ]; then
  command -v g++ >/dev/null || fail "g++ is missing: apt-get install -y g++"
  tools_hash=$({ "$NVCC" --version; g++ --version; } | sha256sum | cut -c1-16)
  dir="$CACHE/$source_hash-$tools_hash"
  if [ -x "$dir/gpu-bench" ]; then
    binary="$dir/gpu-bench"
  else
    # nvcc's own include folder has cuda.h, which the host program needs for the driver's types.
    include=$("$NVCC" --dryrun -fatbin -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ INCLUDES="-I\([^"]*\)".*/\1/p' | head -n 1)
    [ -f "$include/cuda.h" ] || fail "cuda.h is not in $NVCC's include folder ($include): install the toolkit's driver headers (cuda-driver-dev)"
    offered=" $("$NVCC" --list-gpu-code | tr '\n' ' ') "
    gencode=()
    sass=()
    for arch in "${WANTED_SASS[@]}"; do
      if [[ "$offered" == *" sm_$arch "* ]]; then
        gencode+=(-gencode "arch=compute_$arch,code=sm_$arch")
        sass+=("sm_$arch")
      fi
    done
    [ ${#sass[@]} -gt 0 ] || fail "$NVCC offers none of sm_${WANTED_SASS[*]}"
    # PTX of compute_100 JIT-compiles for every later GPU (10.x, 11.x, 12.x and beyond); the
    # kernels use nothing past compute capability 8.0. An older toolkit: its newest architecture.
    ptx_arch=100
    [[ "$offered" == *" sm_100 "* ]] || ptx_arch=${sass[-1]#sm_}
    gencode+=(-gencode "arch=compute_$ptx_arch,code=compute_$ptx_arch")
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    threads=$(nproc 2>/dev/null || echo 2)
    say "compiling the GPU code with $NVCC: SASS for ${sass[*]}, PTX for compute_$ptx_arch, compatibility PTX for ${COMPAT_ARCHS[*]/#/compute_} ($threads threads)"
    started=$(date +%s.%N)
    "$NVCC" -fatbin -O3 -std=c++17 --threads "$threads" "${gencode[@]}" -o "$work/kernels.fatbin" "$SRC/kernels.cu" \
      || fail "nvcc failed to compile $SRC/kernels.cu"
    ptxas="$(dirname "$NVCC")/ptxas"
    [ -x "$ptxas" ] || fail "ptxas is not beside $NVCC: install the toolkit's cuda-nvcc package whole"
    for arch in "${COMPAT_ARCHS[@]}"; do
      "$NVCC" -ptx -O3 -std=c++17 -arch="compute_$arch" -o "$work/compat-$arch.nvcc.ptx" "$SRC/kernels.cu" \
        || fail "nvcc failed to compile $SRC/kernels.cu to PTX for compute_$arch"
      grep -qE '^\.version [0-9]+\.[0-9]+$' "$work/compat-$arch.nvcc.ptx" || fail "nvcc's PTX for compute_$arch has no .version line"
      sed -E "s/^\.version [0-9]+\.[0-9]+$/.version $COMPAT_PTX_ISA/" "$work/compat-$arch.nvcc.ptx" >"$work/compat-$arch.ptx"
      "$ptxas" -arch="sm_$arch" -o /dev/null "$work/compat-$arch.ptx" \
        || fail "the kernels use a PTX feature newer than ISA $COMPAT_PTX_ISA (ptxas above says which): raise COMPAT_PTX_ISA and COMPAT_CUDA in $0, and the oldest driver in docs/gpu-benchmark.md"
    done
    fatbin_done=$(date +%s.%N)
    g++ -O2 -std=c++17 -Wall -Wextra -s -I"$include" -I"$SRC" \
      -DGB_FATBIN="\"$work/kernels.fatbin\"" -DGB_BUILD="\"$source_hash\"" -DGB_SASS="\"${sass[*]}\"" -DGB_PTX="\"compute_$ptx_arch\"" \
      -DGB_COMPAT_PTX_75="\"$work/compat-75.ptx\"" -DGB_COMPAT_PTX_80="\"$work/compat-80.ptx\"" \
      -DGB_COMPAT_PTX_ISA="\"$COMPAT_PTX_ISA\"" -DGB_COMPAT_CUDA="$COMPAT_CUDA" \
      -static-libstdc++ -static-libgcc -o "$work/gpu-bench" "$SRC/gpu-bench.cpp" "$SRC/gpu-code.S" -ldl \
      || fail "g++ failed to build the host program"
    finished=$(date +%s.%N)
    timing=$(awk -v a="$started" -v b="$fatbin_done" -v c="$finished" 'BEGIN { printf "GPU code %.1f s, host program %.1f s", b - a, c - b }')
    printf '%s\n%s\nSASS: %s\nPTX: compute_%s\ncompatibility PTX: %s (ISA %s)\n' "$("$NVCC" --version | tail -n 2 | head -n 1)" "$timing" "${sass[*]}" "$ptx_arch" "${COMPAT_ARCHS[*]/#/compute_}" "$COMPAT_PTX_ISA" >"$work/build.txt"
    say "compiled in $timing"
    # Into the cache in one rename: a build beside this one finds a whole binary or none.
    mkdir -p "$CACHE"
    staged="$CACHE/.staging-$$"
    rm -rf "$staged"
    mkdir "$staged"
    cp "$work/gpu-bench" "$work/build.txt" "$staged/"
    mv -T "$staged" "$dir" 2>/dev/null || rm -rf "$staged"
    binary="$dir/gpu-bench"
  fi
else
  # No toolkit here: a binary compiled from these very sources elsewhere on this machine will do.
  binary=$(ls -t "$CACHE/$source_hash"-*/gpu-bench 2>/dev/null | head -n 1 || true)
  [ -n "$binary" ] || fail "nvcc is missing, and no gpu-bench built from these sources is cached in $CACHE. Install the CUDA 13 toolkit (NVIDIA's CUDA apt repository: apt-get install -y cuda-nvcc-13-0 cuda-cudart-dev-13-0 cuda-driver-dev-13-0, or cuda-toolkit-13-0), put its nvcc on PATH or set NVCC=/usr/local/cuda/bin/nvcc, and run this again"
  say "nvcc is missing: using $binary, built earlier from the same sources"
fi

if [ -n "$ROOTFS" ]; then
  rm -rf "$ROOTFS"
  mkdir -p "$ROOTFS"
  cp "$binary" "$ROOTFS/gpu-bench"
  libs=$(node_libs "$binary")
  libc=$(printf '%s\n' "$libs" | grep '/libc\.so\.6$' || true)
  [ -n "$libc" ] || fail "ldd lists no libc.so.6 for $binary"
  # libcuda.so.1 (any driver since R450) links these besides libc; with glibc 2.34+ most are stubs.
  for extra in libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1; do
    [ -e "$(dirname "$libc")/$extra" ] && libs+=$'\n'"$(dirname "$libc")/$extra"
  done
  for lib in $(printf '%s\n' "$libs" | sort -u); do
    mkdir -p "$ROOTFS$(dirname "$lib")"
    cp -L "$lib" "$ROOTFS$lib"
  done
  # The root runs: its own loader and libraries start the binary, with no driver here it says so.
  loader=$(printf '%s\n' "$libs" | grep '/ld-linux[^/]*$' | head -n 1)
  "$ROOTFS$loader" --library-path "$ROOTFS$(dirname "$libc")" "$ROOTFS/gpu-bench" --version >/dev/null \
    || fail "the binary does not start with the libraries copied into $ROOTFS"
  say "image root in $ROOTFS ($(du -sk "$ROOTFS" | cut -f1) KiB)"
fi
printf '%s\n' "$binary"
