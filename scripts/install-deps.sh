#!/usr/bin/env bash
# Installs what building and testing megahost needs, only where missing:
# Debian packages for the C++ stack (clang, its runtimes and OpenMP for the
# libFuzzer build), and one Python virtual environment, outside the
# repository, holding every package the tests and benches import
# (scripts/python-requirements.txt, pinned as one consistent set).
# Its folder is what `scripts/python-env --dir` names ($venv, by
# default /opt/megahost-venv for root); the tests find it the same way. A
# complete environment, one holding a copy of the requirements it was built
# from, is reused as it is. With --no-python, only the Debian packages (what
# building and running need: scripts/run-default.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

debian_packages=(
  g++ cmake ninja-build pkg-config ccache
  libboost-dev libtomlplusplus-dev libgflags-dev libgoogle-glog-dev libgtest-dev libgmock-dev
  libopenblas-dev libdnnl-dev libopenmpi-dev openmpi-bin nlohmann-json3-dev libpcre2-dev libxxhash-dev libcpp-httplib-dev
  libsentencepiece-dev
  python3 python3-venv
  clang-14 libclang-rt-14-dev libomp-14-dev
)
missing=()
for p in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    -o DPkg::Lock::Timeout=300 "${missing[@]}"
fi

[ "${1:-}" = --no-python ] && exit 0
requirements=scripts/python-requirements.txt
venv=$(scripts/python-env --dir)
# The copy of the requirements is written last: its presence means complete.
stamp=$venv/megahost-requirements.txt
if ! cmp -s "$requirements" "$stamp"; then
  echo "creating the Python environment $venv from $requirements (a few GB, minutes)"
  rm -f "$stamp"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
  "$venv/bin/python" -m pip check
  cp "$requirements" "$stamp"
fi
