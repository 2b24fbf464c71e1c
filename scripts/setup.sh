#!/usr/bin/env bash
# Installs everything Sightline needs on a fresh Debian 12 machine of the development kind
# (the CUDA 13 toolkit is expected under /usr/local/cuda already). Idempotent: when everything is
# present it only checks and returns within a second or two.
#
#   scripts/setup.sh            Debian packages + libtorch (from the torch==2.11.0 wheel on PyPI)
#                               + that wheel in a Python venv (third_party/pytorch-venv, run
#                               through scripts/torch-python) for the Python jobs of the tests
#   scripts/setup.sh --no-torch Debian packages only
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
want_torch=1
for a in "$@"; do
  case "$a" in
    --no-torch) want_torch=0 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$a' (try --help)" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake ninja-build pkg-config git python3 python3-pip unzip
  libsqlite3-dev sqlite3 libfmt-dev libcli11-dev libsimdjson-dev nlohmann-json3-dev
  libtomlplusplus-dev catch2 libbenchmark-dev zlib1g-dev libzstd-dev
  qt6-base-dev qt6-charts-dev xvfb clang-format-14 universal-ctags
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "setup: Debian packages present"
fi

# libtorch: the C++ parts of the torch wheel (headers, libraries, CMake package), unpacked into the
# ignored folder third_party/libtorch. The wheel is cached under ~/.cache/sightline so a fresh clone
# on the same machine does not download it again.
torch_version=2.11.0
transformers_version=5.17.0
accelerate_version=1.15.0
dest="$here/third_party/libtorch"
# Prints the cached torch wheel's path, downloading it first when the cache has none.
torch_wheel() {
  local cache="${SIGHTLINE_CACHE:-$HOME/.cache/sightline}" wheel
  mkdir -p "$cache"
  wheel=$(ls "$cache"/torch-"$torch_version"-*.whl 2>/dev/null | head -n 1 || true)
  if [ -z "$wheel" ]; then
    echo "setup: downloading the torch==$torch_version wheel from PyPI (about 530 MB)" >&2
    python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$cache" "torch==$torch_version" >&2
    wheel=$(ls "$cache"/torch-"$torch_version"-*.whl | head -n 1)
  fi
  echo "$wheel"
}
if [ "$want_torch" = 1 ]; then
  if [ -f "$dest/.version" ] && [ "$(cat "$dest/.version")" = "$torch_version" ]; then
    echo "setup: libtorch $torch_version present in third_party/libtorch"
  else
    wheel=$(torch_wheel)
    echo "setup: unpacking libtorch from $(basename "$wheel")"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    unzip -q "$wheel" 'torch/include/*' 'torch/lib/*' 'torch/share/cmake/*' -d "$tmp"
    rm -rf "$dest"
    mkdir -p "$(dirname "$dest")"
    mv "$tmp/torch" "$dest"
    echo "$torch_version" > "$dest/.version"
  fi
  # The same wheel for Python, in a venv of its own, with transformers: the multi-rank test runs a
  # two-process gloo job, the trainer's parity test runs transformers' model as the reference. Its
  # CUDA libraries come from /usr/local/cuda, the three the toolkit lacks from PyPI.
  venv="$here/third_party/pytorch-venv"
  venv_version="torch $torch_version, transformers $transformers_version"
  if [ -f "$venv/.version" ] && [ "$(cat "$venv/.version")" = "$venv_version" ]; then
    echo "setup: Python $venv_version present in third_party/pytorch-venv"
  else
    wheel=$(torch_wheel)
    echo "setup: installing $(basename "$wheel") into third_party/pytorch-venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --no-deps "$wheel" nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5 \
      nvidia-cufile==1.20.0.107
    "$venv/bin/pip" install --quiet typing_extensions sympy filelock jinja2 networkx fsspec numpy \
      "transformers==$transformers_version"
    "$here/scripts/torch-python" -c 'import torch, torch.distributed as d, transformers; assert d.is_gloo_available()'
    echo "$venv_version" > "$venv/.version"
  fi
  # transformers' Trainer needs accelerate (the Python adapter's Trainer test); added to a venv made
  # before it was wanted without rebuilding that venv. A venv that is a link belongs to another
  # checkout (a worktree sharing the main one's): it is left as it is.
  if ! "$venv/bin/python" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("accelerate") is None)'; then
    if [ -L "$venv" ]; then
      echo "setup: third_party/pytorch-venv is a link to another checkout's venv, which lacks accelerate: left as it is (the Trainer test skips)"
    else
      echo "setup: installing accelerate==$accelerate_version into third_party/pytorch-venv"
      "$venv/bin/pip" install --quiet "accelerate==$accelerate_version"
    fi
  fi
fi
# cuobjdump and nvdisasm, which the toolkit here lacks: the trainer kernels' resource check
# (tests/trainer/kernel_resources.py) reads the built plugin with them. From their PyPI wheels,
# unpacked into the ignored folder third_party/cuda-tools/bin; without them that check skips.
cuda_tools_version=13.5.37
# The wheels' binaries in DIR/*.whl into DIR/bin: true where both are there.
unpack_tools() {
  local w
  for w in "$1"/*.whl; do unzip -q -j -o "$w" 'nvidia/*/bin/*' -d "$1/bin" || return 1; done
  [ -f "$1/bin/cuobjdump" ] && [ -f "$1/bin/nvdisasm" ]
}
tools="$here/third_party/cuda-tools"
if [ -x /usr/local/cuda/bin/cuobjdump ] && [ -x /usr/local/cuda/bin/nvdisasm ]; then
  echo "setup: cuobjdump and nvdisasm present in /usr/local/cuda/bin"
elif [ -f "$tools/.version" ] && [ "$(cat "$tools/.version")" = "$cuda_tools_version" ] && [ -x "$tools/bin/cuobjdump" ] && [ -x "$tools/bin/nvdisasm" ]; then
  echo "setup: cuobjdump and nvdisasm $cuda_tools_version present in third_party/cuda-tools"
else
  echo "setup: installing cuobjdump and nvdisasm $cuda_tools_version into third_party/cuda-tools"
  tmp_tools=$(mktemp -d)
  # unpacked beside the wheels first: a failed download or unpacking leaves what was there as it was
  if python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp_tools" \
      "nvidia-cuda-cuobjdump==$cuda_tools_version" "nvidia-cuda-nvdisasm==$cuda_tools_version" >&2 &&
    unpack_tools "$tmp_tools"; then
    chmod +x "$tmp_tools/bin"/*
    rm -rf "$tools" && mkdir -p "$tools" && mv "$tmp_tools/bin" "$tools/bin"
    echo "$cuda_tools_version" > "$tools/.version"
  else
    echo "setup: could not install cuobjdump and nvdisasm: the kernel resource check will skip" >&2
  fi
  rm -rf "$tmp_tools"
fi
echo "setup: done"
