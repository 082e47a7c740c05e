#!/usr/bin/env bash
# One command from a fresh machine: install what is missing, fetch the default model,
# build, and run the main job (the research-team workflow) on the default model.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install_deps.sh"
"$root/scripts/fetch_model.sh"
"$root/scripts/build.sh"
cd "$root"
echo "[arbor] running the main job: workflows/examples/research_team.json"
./build/arbor run workflows/examples/research_team.json
