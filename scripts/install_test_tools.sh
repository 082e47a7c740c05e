#!/usr/bin/env bash
# Installs the tools of the server's client tests, only those that are missing:
# the official `openai` Python package (pip) and Debian's chromium (headless
# dashboard check). Idempotent; the tests skip with a message when a tool is absent.
set -euo pipefail

sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"

if python3 -c "import openai" >/dev/null 2>&1; then
  echo "[arbor] python openai: present"
else
  echo "[arbor] installing python package: openai"
  if ! python3 -m pip --version >/dev/null 2>&1; then
    $sudo_cmd apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends python3-pip
  fi
  # Debian marks the system Python as externally managed (PEP 668).
  python3 -m pip install --quiet openai 2>/dev/null ||
    python3 -m pip install --quiet --break-system-packages openai
fi

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  echo "[arbor] chromium: present"
else
  echo "[arbor] installing: chromium"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends chromium
fi
