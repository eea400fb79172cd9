#!/usr/bin/env bash
# Rehearses the GPU check without a GPU (docs/gpu.md, "The rehearsal"): runs
# bench/gpu_check.sh in a minimal Debian 12 root that holds what a bare CUDA
# image holds and nothing of ours:
#   - debootstrap's minbase with g++ and python3, CMake and ninja from PyPI
#     (as a CUDA image's pip has them), and ccache so that a second rehearsal
#     builds quickly; none of the build's -dev packages (checked);
#   - this machine's CUDA toolkit (nvcc, cudart, headers) without cuBLAS and
#     NCCL, which lie instead where pip's wheels put them
#     (dist-packages/nvidia/cu13, nvidia/nccl), under their versioned names only;
#   - the bundle scripts/gpu-bundle.sh writes.
# The check runs there without network (its own network namespace) and
# must end as it does without a device: configured against the bundle,
# built, the GPU tests run with none failing, the dry run done, the device
# stages skipped, exit status 3.
#
#   bench/gpu_rehearsal.sh [WORK]
#
# WORK (default /var/tmp/megahost-gpu-rehearsal) keeps the root, the bundle,
# the wheels, the ccache, the build (WORK/build) and the check's output
# (WORK/out), outside the repository. Needs root (debootstrap, chroot, mounts), Debian's and PyPI's
# registries for the first run, and CUDA at CUDA_HOME (/usr/local/cuda).
# Environment: JOBS (2), MIRROR (Debian's, from this machine's apt sources).
# Exit status: 0 the rehearsal went as expected, 1 it did not.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work=$(realpath -m "${1:-/var/tmp/megahost-gpu-rehearsal}")
root=$work/root
cuda=$(realpath "${CUDA_HOME:-/usr/local/cuda}")
mirror=${MIRROR:-http://deb.debian.org/debian}
[[ $(id -u) -eq 0 ]] || { echo "gpu_rehearsal: needs root (debootstrap, chroot, mounts)" >&2 && exit 1; }
[[ -x $cuda/bin/nvcc ]] || { echo "gpu_rehearsal: no nvcc in $cuda; set CUDA_HOME" >&2 && exit 1; }
mkdir -p "$work"

# What the build needs of ours, none of which the root may hold.
our_packages=(libboost-dev libtomlplusplus-dev libgflags-dev libgoogle-glog-dev libgtest-dev libgmock-dev
  libopenblas-dev nlohmann-json3-dev libpcre2-dev libxxhash-dev libopenmpi-dev pkgconf pkg-config)

make_root() {
  [[ -f $root/.rehearsal-root ]] && return 0
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap
  rm -rf "$root"
  echo "gpu_rehearsal: debootstrap into $root (minutes)"
  debootstrap --variant=minbase --include=g++,python3,python3-pip,ccache bookworm "$root" "$mirror" \
    >"$work/debootstrap.log"
  python3 -m pip download --quiet --only-binary=:all: --dest "$work/wheels" cmake ninja
  cp -r "$work/wheels" "$root/tmp/wheels"
  chroot "$root" python3 -m pip install --quiet --no-index --find-links /tmp/wheels --break-system-packages cmake ninja
  rm -rf "$root/tmp/wheels"
  touch "$root/.rehearsal-root"
}

# The toolkit as a CUDA image may hold it: nvcc, cudart and the headers in
# /usr/local/cuda, cuBLAS and NCCL as pip's wheels lay them out. Hard links,
# so it costs no copy.
copy() { cp -al "$@" 2>/dev/null || cp -a "$@"; }
lay_out_cuda() {
  local toolkit=$root/usr/local/cuda-cudart wheels=$root/usr/local/lib/python3.11/dist-packages/nvidia
  rm -rf "$toolkit" "$wheels" "$root/usr/local/cuda"
  mkdir -p "$toolkit/lib" "$wheels/cu13/include" "$wheels/cu13/lib" "$wheels/nccl/include" "$wheels/nccl/lib"
  copy "$cuda/bin" "$cuda/nvvm" "$cuda/include" "$toolkit/"
  copy "$cuda"/lib/{libcudart*,libcudadevrt.a,libculibos.a,stubs,cmake} "$toolkit/lib/"
  ln -s lib "$toolkit/lib64"
  mv "$toolkit"/include/cublas* "$wheels/cu13/include/"
  mv "$toolkit"/include/nccl*.h "$wheels/nccl/include/"
  rm -f "$toolkit"/include/cudnn*
  copy "$cuda"/lib/libcublas.so.[0-9]* "$cuda"/lib/libcublasLt.so.[0-9]* "$wheels/cu13/lib/"
  copy "$cuda"/lib/libnccl.so.[0-9]* "$wheels/nccl/lib/"
  ln -s cuda-cudart "$root/usr/local/cuda"
}

check_root_is_bare() {
  local p held=()
  for p in "${our_packages[@]}"; do
    chroot "$root" dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && held+=("$p")
  done
  ((${#held[@]} == 0)) || { echo "gpu_rehearsal: the root holds ${held[*]}; remove $root" >&2 && return 1; }
  echo "gpu_rehearsal: the root holds none of: ${our_packages[*]}"
}

mounted=()
mount_into() {  # mount_into <source> <path in the root> [options]
  mkdir -p "$root$2"
  mount --bind "$1" "$root$2"
  mounted=("$root$2" "${mounted[@]}")
}
unmount_all() {
  local m
  for m in "${mounted[@]}"; do umount "$m" || umount -l "$m"; done
}

make_root
lay_out_cuda
check_root_is_bare
scripts/gpu-bundle.sh "$work/bundle"
mkdir -p "$work/ccache" "$work/out" "$work/build"
trap unmount_all EXIT
mount_into /dev /dev
mount_into /proc /proc
mount_into "$repo" /src
mount_into "$work/bundle" /bundle
mount_into "$work/ccache" /ccache
mount_into "$work/out" /out
mount_into "$work/build" /build

echo "gpu_rehearsal: bench/gpu_check.sh in $root, no network"
status=0
TIMEFORMAT="gpu_rehearsal: the check took %0R s, %0U s user and %0S s system CPU time"
time unshare --net chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
  PATH=/usr/local/cuda/bin:/usr/local/bin:/usr/bin:/bin \
  GPU_BUNDLE=/bundle GPU_BUILD=/build JOBS="${JOBS:-2}" CCACHE_DIR=/ccache \
  CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache \
  nice bash /src/bench/gpu_check.sh /out || status=$?

expect() {  # expect <what> <command...>
  if "${@:2}"; then echo "gpu_rehearsal: ok: $1"; else echo "gpu_rehearsal: NOT as expected: $1" && failed=1; fi
}
failed=0
expect "exit status 3 (no CUDA device), got $status" test "$status" -eq 3
expect "configured against the bundle" grep -q "configure.*against the bundle" "$work/out/summary.txt"
expect "no GPU test failed and some ran" grep -qE "gpu tests.* [1-9][0-9]* passed, 0 failed" "$work/out/summary.txt"
expect "the tests that need a device skipped" grep -qE "gpu tests.* [1-9][0-9]* skipped" "$work/out/summary.txt"
expect "the dry run predicted the memory" grep -q "peak memory, dry run" "$work/out/summary.txt"
expect "eight files or fewer in the output" test "$(find "$work/out" -type f | wc -l)" -le 8
exit $failed
