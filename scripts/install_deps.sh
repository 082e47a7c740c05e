#!/usr/bin/env bash
# Installs the Debian packages Arbor needs, only those that are missing. Idempotent.
set -euo pipefail

packages=(
  g++ cmake make git unzip ca-certificates curl
  libcaf-dev libssl-dev libboost-dev nlohmann-json3-dev libsentencepiece-dev libcli11-dev libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-jsonschema
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ! python3 -m pip --version >/dev/null 2>&1; then missing+=(python3-pip); fi

if ((${#missing[@]})); then
  echo "[arbor] installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "[arbor] system packages: all present"
fi
