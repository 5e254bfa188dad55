#!/usr/bin/env bash
# Installs the peers the benchmarks compare against: ONNX Runtime for Node.js
# (npm onnxruntime-node; its Linux x64 library ships inside the package, so the
# install script — which would download — is skipped) and python3-onnx, which
# writes the ONNX models the peers run. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
dpkg-query -W -f='${Status}' python3-onnx 2>/dev/null | grep -q "install ok installed" || need+=(python3-onnx)
# Node.js may come from elsewhere (with its own npm): only install it if absent.
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

if [ ! -f bench/node_modules/onnxruntime-node/package.json ]; then
  (cd bench && npm install --ignore-scripts --no-audit --no-fund --silent)
fi
echo "install-bench-deps: python3-onnx and onnxruntime-node present"
