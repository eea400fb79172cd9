#!/usr/bin/env bash
# Writes into DIR the Debian packages that building megahost needs on a
# machine with a C++ compiler, CUDA and CMake but none of our libraries and no
# network (a bare CUDA image): the libraries' headers, the libraries and what
# they need at run time, as apt downloads them (not installed), and
# manifest.txt. bench/gpu_check.sh unpacks them into a private prefix where
# the system lacks them (docs/gpu.md, "Building without network").
#
#   scripts/gpu-bundle.sh DIR
#
# The packages are those of scripts/install-deps.sh that the build needs,
# MPI left out (optional, and comm_nccl runs ranks as threads without it),
# with every dependency apt resolves for them, less what g++ itself brings
# (libc, libstdc++, libgcc, libgomp: the target's own must be used). Versions
# are this machine's apt candidates, so run it on Debian 12 with current
# lists (apt-get update). Exit status: 0 done, 1 failure, 2 usage.
set -euo pipefail

usage="usage: scripts/gpu-bundle.sh DIR"
[[ $# -eq 1 ]] || { echo "$usage" >&2 && exit 2; }
dir=$1
max_bytes=$((40 * 1024 * 1024))
libraries=(
  libboost-dev libtomlplusplus-dev libgflags-dev libgoogle-glog-dev libgtest-dev libgmock-dev libopenblas-dev
  nlohmann-json3-dev libpcre2-dev libxxhash-dev pkgconf
)

# What apt installs for PACKAGES on a system that has nothing, one
# "name version architecture" line each.
resolve() {
  local out
  out=$(apt-get -s -o Dir::State::status=/dev/null install --no-install-recommends "$@" 2>&1) || {
    echo "$out" >&2
    echo "gpu-bundle: apt cannot resolve ${*}; run 'apt-get update' and try again" >&2
    return 1
  }
  # Inst libxxhash0 (0.8.1-1 Debian:12.15/oldstable [amd64])
  sed -nE 's/^Inst ([^ ]+) \(([^ ]+) .*\[([a-z0-9]+)\].*/\1 \2 \3/p' <<<"$out" | sort -u
}

wanted=$(resolve "${libraries[@]}")
toolchain=$(resolve g++)
packages=$(comm -23 <(echo "$wanted") <(echo "$toolchain"))

mkdir -p "$dir"
rm -f "$dir"/*.deb "$dir/manifest.txt"
echo "gpu-bundle: downloading $(wc -l <<<"$packages") packages into $dir"
(cd "$dir" && awk '{print $1 "=" $2}' <<<"$packages" | xargs apt-get download -qq -o APT::Sandbox::User="$(id -un)")

# The newest glibc any package was built against (its "libc6 (>= X)").
glibc=0
total=0
lines=()
while read -r name version arch; do
  file=$(printf '%s_%s_%s.deb' "$name" "${version//:/%3a}" "$arch")
  [[ -f $dir/$file ]] || { echo "gpu-bundle: apt did not write $dir/$file" >&2 && exit 1; }
  size=$(stat -c %s "$dir/$file")
  total=$((total + size))
  sha256=$(sha256sum "$dir/$file" | cut -d' ' -f1)
  lines+=("$(printf 'package\t%s\t%s\t%s\t%s\t%s' "$name" "$version" "$file" "$size" "$sha256")")
  needs=$(dpkg-deb -f "$dir/$file" Depends | sed -nE 's/.*libc6 \(>= ([^)]+)\).*/\1/p')
  for v in $needs; do
    dpkg --compare-versions "$v" gt "$glibc" && glibc=$v
  done
done <<<"$packages"

if ((total > max_bytes)); then
  echo "gpu-bundle: the packages take $((total / 1048576)) MiB, over the 40 MiB a GPU machine is sent;" \
    "see which grew in $dir" >&2
  exit 1
fi

. /etc/os-release  # PRETTY_NAME
{
  echo "# megahost GPU build bundle, written by scripts/gpu-bundle.sh; bench/gpu_check.sh reads it."
  printf 'distribution\t%s\n' "$PRETTY_NAME"
  printf 'architecture\t%s\n' "$(dpkg --print-architecture)"
  printf 'glibc\t%s\n' "$glibc"
  printf '# package\tname\tversion\tfile\tbytes\tsha256\n'
  printf '%s\n' "${lines[@]}"
} >"$dir/manifest.txt"
echo "gpu-bundle: $(wc -l <<<"$packages") packages, $((total / 1048576)) MiB, need glibc >= $glibc: $dir/manifest.txt"
