#!/usr/bin/env bash
# Rehearses the README on a fresh Debian 12: runs its two commands,
# scripts/run-default.sh and then scripts/test.sh (what CI runs), as root in
# a plain bookworm root that debootstrap makes (minbase, git and
# ca-certificates only: no compiler, no Python packages, none of our
# libraries), on a clone of this repository's HEAD. The root's single
# python3 is /usr/bin/python3, so the tests' Python environment must come
# from scripts/install-deps.sh alone.
#
#   bench/debian_rehearsal.sh [WORK]
#
# WORK (default /var/tmp/megahost-debian-rehearsal) keeps the root and the
# commands' logs (WORK/run-default.log, WORK/test.log), outside the
# repository. A WORK that exists is removed first: every rehearsal starts
# from a fresh root. Needs root (debootstrap, chroot, mounts) and the network
# (Debian's and PyPI's registries). Environment: MIRROR (Debian's);
# CCACHE_DIR, a compiler cache to share with the root (the root's compiler
# is the same package's, so the cache only saves time, it cannot change what
# is built).
# Exit status: 0 both commands succeeded, 1 one failed (its log says which).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work=$(realpath -m "${1:-/var/tmp/megahost-debian-rehearsal}")
root=$work/root
mirror=${MIRROR:-http://deb.debian.org/debian}
[[ $(id -u) -eq 0 ]] || { echo "debian_rehearsal: needs root (debootstrap, chroot, mounts)" >&2 && exit 1; }

mounted=()
mount_into() {  # mount_into <source> <path in the root> [mount options...]
  mkdir -p "$root$2"
  mount "${@:3}" "$1" "$root$2"
  mounted=("$root$2" "${mounted[@]}")
}
unmount_all() {
  local m
  for m in "${mounted[@]}"; do umount "$m" || umount -l "$m"; done
}

rm -rf "$work"
mkdir -p "$work"
command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >"$work/apt.log"
echo "debian_rehearsal: debootstrap bookworm into $root (minutes)"
debootstrap --variant=minbase --include=git,ca-certificates bookworm "$root" "$mirror" >"$work/debootstrap.log"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# This machine's network may pass through a proxy with its own certificate
# authority: the root trusts what this machine trusts, nothing else of it.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null
fi
# The source path lies under /work, as it does where the shared compiler
# cache was filled (its base_dir), so the cache's entries match.
git clone -q --no-hardlinks "$repo" "$root/work/megahost"

trap unmount_all EXIT
mount_into /dev /dev --bind
mount_into devpts /dev/pts -t devpts
mount_into tmpfs /dev/shm -t tmpfs
mount_into proc /proc -t proc
mount_into sysfs /sys -t sysfs
cache_env=()
if [[ -n ${CCACHE_DIR:-} ]]; then
  mount_into "$CCACHE_DIR" /ccache --bind
  cache_env=(CCACHE_DIR=/ccache CCACHE_BASEDIR=/work CCACHE_NOHASHDIR=1)
fi

in_root() {  # in_root <log> <command>
  echo "debian_rehearsal: $2 (log: $1)"
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin \
    "${cache_env[@]}" bash -c "cd /work/megahost && $2" >"$1" 2>&1
}
status=0
in_root "$work/run-default.log" scripts/run-default.sh || status=1
[[ $status -eq 0 ]] && { in_root "$work/test.log" scripts/test.sh || status=1; }
tail -n 12 "$work/test.log" 2>/dev/null || tail -n 12 "$work/run-default.log"
echo "debian_rehearsal: $([[ $status -eq 0 ]] && echo "both README commands passed" || echo FAILED)"
exit $status
