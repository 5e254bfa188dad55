#!/usr/bin/env bash
# Installs what cge needs to build and test, from Debian's packages. Idempotent:
# packages already present are left alone, and apt-get runs only when needed.
set -euo pipefail

packages=(
  build-essential binutils cmake ninja-build pkg-config
  libcmocka-dev libdnnl-dev
  python3 python3-numpy python3-pytest python3-venv python3-pip python3-setuptools
  libprotobuf-c-dev protobuf-c-compiler libonnx-dev python3-onnx clang
  python3-torch python3-torchvision
  openmpi-bin libopenmpi-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
