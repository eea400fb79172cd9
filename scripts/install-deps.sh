#!/usr/bin/env bash
# Installs what building and testing megahost needs, only where missing:
# Debian packages for the C++ stack (clang, its runtimes and OpenMP for the
# libFuzzer build), PyPI packages for the interoperability tests.
# torch is Debian's (python3-torch, CPU-only, for Debian's /usr/bin/python3):
# PyPI's torch wheels bring gigabytes of CUDA libraries.
set -euo pipefail

debian_packages=(
  g++ cmake ninja-build pkg-config ccache
  libboost-dev libtomlplusplus-dev libgflags-dev libgoogle-glog-dev libgtest-dev libgmock-dev
  libopenblas-dev libdnnl-dev libopenmpi-dev openmpi-bin nlohmann-json3-dev libpcre2-dev libxxhash-dev libcpp-httplib-dev
  python3 python3-pip python3-torch
  clang-14 libclang-rt-14-dev libomp-14-dev
)
# tokenizers is pinned: host/data/unicode_classes.inc is generated from this
# version (scripts/gen_unicode_classes.py), and the parity tests compare with it.
tokenizers_version=0.23.3
python_packages=(numpy "tokenizers==$tokenizers_version" safetensors tensorboard matplotlib)

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

python=$(command -v python3)
if ! "$python" -c "import numpy, tokenizers, safetensors, tensorboard, matplotlib; assert tokenizers.__version__ == '$tokenizers_version'" 2>/dev/null; then
  echo "installing Python packages: ${python_packages[*]}"
  "$python" -m pip install --quiet --disable-pip-version-check "${python_packages[@]}" ||
    "$python" -m pip install --quiet --disable-pip-version-check --break-system-packages "${python_packages[@]}"
fi

# The Hugging Face interop test (tests/convert) runs transformers on Debian's
# torch 1.13, with a transformers release that supports that torch (pinned: the one it was tested with).
transformers_version=4.46.3
torch_python=/usr/bin/python3
if ! "$torch_python" -c "import torch, safetensors, transformers; assert transformers.__version__ == '$transformers_version'" \
    2>/dev/null; then
  echo "installing Python packages for $torch_python: transformers==$transformers_version safetensors"
  "$torch_python" -m pip install --quiet --disable-pip-version-check --break-system-packages \
    "transformers==$transformers_version" safetensors
fi
# The serving tests (tests/serve): OpenAI's client, and jinja2 for transformers' chat templates.
"$torch_python" -c "import openai, jinja2" 2>/dev/null || "$torch_python" -m pip install --quiet --disable-pip-version-check --break-system-packages openai jinja2
