#!/usr/bin/env bash
# The GPU check of the CUDA backend, on a machine with an NVIDIA GPU; sized to finish in
# under 8 minutes on a 16-core H200 machine (a 15-minute device budget leaves room to fix
# and rerun). Real weights cannot travel there, so it writes synthetic models in real
# shapes (`arbor synth-model`). Steps, each timed and recorded:
#   1. binaries: .device_bundle/ when carried (scripts/device_bundle.sh builds it where
#      Arbor's C++ dependencies are installed), else a -DARBOR_CUDA=ON build here;
#   2. the CUDA tests: every kernel against the CPU, the CUDA engine against the CPU
#      engine (tiny, SmolLM2-shaped, Llama-3-8B-shaped), device selection, the runtime
#      on cuda (cached == uncached, no page leaked after cancel);
#   3. synthetic models: SmolLM2-135M shape (Q4_1) and Llama-3-8B shape (Q4_0);
#   4. `arbor bench engine --device cuda --prompt 512,4096 --batch 1,8,64` on both (the
#      issue's prefill and aggregate-decode figures; bench engine runs both precisions:
#      accurate keeps the decode GEMV's activations f32, fast rounds them to int8 for
#      __dp4a products), `arbor bench workflow --device cuda
#      --agents 1,8,64 --prefix-documents 4` (a ~4.2k-token SharedPrefix) on the SmolLM2
#      shape; the SmolLM2 shape's decode again with ARBOR_CUDA_GRAPHS=0 (what the CUDA
#      graphs save: decode steps launched kernel by kernel) and ARBOR_CUDA_GRAPH_REPLAY=0
#      (what replay saves: every step captured), and the Llama-3-8B shape's pp4096
#      with ARBOR_CUDA_TENSOR_CORE_ATTENTION=0 (the prefill tiles' attention on CUDA cores);
#      bench engine also measures greedy decode with each step waiting vs overlapped, and
#      the 64-agent workflow runs again with --no-overlap (what overlap saves end to end)
#      and with --temperature 0.8 (sampled rows drawn on the device, host ms/step);
#      `arbor bench constrained` (JSON-Schema rows at batch 1/8/64) with and without
#      --no-overlap (what late masks save: constrained steps overlapped); last, the
#      Llama-3-8B shape's decode at 1/2/4/8 rows with the GEMV (ARBOR_CUDA_GEMV_MAX_ROWS=8)
#      and with the tensor-core GEMM (=0): where the GEMV should hand over.
# Writes $OUT/device_check.json (every step: status, seconds, figures) and
# $OUT/device_check.log ($OUT defaults to build-device/). Exit 0 when every step passed.
# ARBOR_DEVICE_LLAMA_LAYERS (default 32) trims the Llama-3-8B model for a smoke run.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${OUT:-$root/build-device}"
mkdir -p "$out"
work="${ARBOR_DEVICE_WORK:-/tmp/arbor-device}"
mkdir -p "$work"
log="$out/device_check.log"
: >"$log"
exec > >(tee -a "$log") 2>&1
budget_s="${ARBOR_DEVICE_BUDGET_S:-450}"  # stop starting new steps after this
started=$(date +%s)
steps_json=""
failed=0

# record NAME STATUS SECONDS [JSON-FILE]: appends one step to the report.
record() {
  local figures="null"
  if [ -n "${4:-}" ] && [ -s "$4" ] && python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$4" 2>/dev/null; then
    figures="$(cat "$4")"
  fi
  steps_json+="${steps_json:+,}{\"step\": \"$1\", \"status\": \"$2\", \"seconds\": $3, \"figures\": $figures}"
  [ "$2" = ok ] || failed=1
  echo "[device_check] $1: $2 (${3}s)"
}

# run NAME JSON-FILE COMMAND...: runs a step unless the budget is spent.
run() {
  local name="$1" json="$2"
  shift 2
  if [ $(( $(date +%s) - started )) -gt "$budget_s" ]; then
    record "$name" skipped_budget 0
    return
  fi
  echo "[device_check] $name: $*"
  local t0=$(date +%s)
  if "$@"; then record "$name" ok $(( $(date +%s) - t0 )) "$json"; else record "$name" failed $(( $(date +%s) - t0 )) "$json"; fi
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "nvidia-smi failed"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for d in $(python3 -c "import nvidia, os; print(' '.join(os.path.join(p, sub, 'lib') for p in nvidia.__path__ for sub in ('cublas', 'cuda_runtime')))" 2>/dev/null); do
  [ -d "$d" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
done

build_here() {
  local build="$root/build-cuda"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DARBOR_CUDA=ON -DARBOR_BENCH=OFF \
    -DCMAKE_CUDA_ARCHITECTURES="${ARBOR_CUDA_ARCH:-native}" >"$work/configure.log" 2>&1 || {
    tail -20 "$work/configure.log"
    return 1
  }
  cmake --build "$build" -j "$(nproc)" --target arbor arbor_kernels_tests arbor_model_tests arbor_runtime_tests >"$work/build.log" 2>&1 || {
    grep -m 20 -E "error|Error" "$work/build.log"
    return 1
  }
  mkdir -p "$work/bin"
  cp "$build/arbor" "$build"/tests/arbor_{kernels,model,runtime}_tests "$work/bin/"
}

bin="$root/.device_bundle"
if [ -x "$bin/arbor" ]; then
  export LD_LIBRARY_PATH="$bin/lib:$LD_LIBRARY_PATH"
  record binaries ok 0
else
  run build "" build_here
  bin="$work/bin"
fi

if [ -x "$bin/arbor" ]; then
  gtest() {  # EXE FILTER JSON: fails when a test fails or was skipped (no device seen)
    "$bin/$1" --gtest_filter="$2" --gtest_brief=1 --gtest_output="json:$3" || return 1
    ! grep -q '"result": "SKIPPED"' "$3"
  }
  run kernel_tests "" gtest arbor_kernels_tests 'Cuda*' "$out/kernel_tests.json"
  run model_tests "" gtest arbor_model_tests 'CudaEngine*:Device*:Factory*' "$out/model_tests.json"
  run runtime_tests "" gtest arbor_runtime_tests 'CudaRuntime*:Devices/RuntimeOnDevice.*' "$out/runtime_tests.json"
  run synth_smollm2 "" "$bin/arbor" synth-model --shape smollm2-135m --type q4_1 --out "$work/smollm2.gguf"
  run synth_llama3_8b "" "$bin/arbor" synth-model --shape llama3-8b --type q4_0 --out "$work/llama3-8b.gguf" \
    --layers "${ARBOR_DEVICE_LLAMA_LAYERS:-32}"
  bench_engine() {  # MODEL REPS SHARED_BATCH JSON (pp512/pp4096, decode at batch 1/8/64; a 4096-token shared prefix)
    "$bin/arbor" bench engine --device cuda --model "$1" --reps "$2" --prompt 512,4096 --batch 1,8,64 \
      --shared-prefix 4096 --shared-batch "$3" --json >"$4"
  }
  run bench_engine_smollm2 "$out/bench_engine_smollm2.json" bench_engine "$work/smollm2.gguf" 3 32 \
    "$out/bench_engine_smollm2.json"
  run bench_engine_llama3_8b "$out/bench_engine_llama3_8b.json" bench_engine "$work/llama3-8b.gguf" 1 8 \
    "$out/bench_engine_llama3_8b.json"
  bench_without_graphs() {  # decode at batch 1 and 8, each step's kernels launched one by one
    ARBOR_CUDA_GRAPHS=0 "$bin/arbor" bench engine --device cuda --model "$work/smollm2.gguf" --reps 3 --prompt 512 \
      --batch 1,8 --json >"$out/bench_engine_smollm2_no_graphs.json"
  }
  run bench_engine_smollm2_no_graphs "$out/bench_engine_smollm2_no_graphs.json" bench_without_graphs
  bench_graphs_captured_every_step() {  # the same, each step captured into its graph (no replay)
    ARBOR_CUDA_GRAPH_REPLAY=0 "$bin/arbor" bench engine --device cuda --model "$work/smollm2.gguf" --reps 3 \
      --prompt 512 --batch 1,8 --json >"$out/bench_engine_smollm2_captured_every_step.json"
  }
  run bench_engine_smollm2_captured_every_step "$out/bench_engine_smollm2_captured_every_step.json" \
    bench_graphs_captured_every_step
  bench_attention_on_cuda_cores() {  # pp4096 of the 8B shape with the shared-prefix passes on CUDA cores
    ARBOR_CUDA_TENSOR_CORE_ATTENTION=0 "$bin/arbor" bench engine --device cuda --model "$work/llama3-8b.gguf" \
      --reps 1 --prompt 4096 --batch 1 --json >"$out/bench_engine_llama3_8b_cuda_core_attention.json"
  }
  run bench_engine_llama3_8b_cuda_core_attention "$out/bench_engine_llama3_8b_cuda_core_attention.json" \
    bench_attention_on_cuda_cores
  bench_workflow() {
    "$bin/arbor" bench workflow --device cuda --model "$work/smollm2.gguf" --agents 1,8,64 --prefix-documents 4 \
      --kv-mem 8192 --json >"$out/bench_workflow.json"
  }
  run bench_workflow "$out/bench_workflow.json" bench_workflow
  bench_workflow_no_overlap() {  # 64 agents, each step waiting for the one before
    "$bin/arbor" bench workflow --device cuda --model "$work/smollm2.gguf" --agents 64 --prefix-documents 4 \
      --kv-mem 8192 --no-overlap --json >"$out/bench_workflow_no_overlap.json"
  }
  run bench_workflow_no_overlap "$out/bench_workflow_no_overlap.json" bench_workflow_no_overlap
  bench_workflow_sampled() {  # 64 agents sampling (temperature 0.8, top_p 0.95): tokens drawn on the device
    "$bin/arbor" bench workflow --device cuda --model "$work/smollm2.gguf" --agents 64 --prefix-documents 4 \
      --kv-mem 8192 --temperature 0.8 --json >"$out/bench_workflow_sampled.json"
  }
  run bench_workflow_sampled "$out/bench_workflow_sampled.json" bench_workflow_sampled
  bench_constrained() {  # JSON-Schema rows at batch 1/8/64, overlapped (late masks) or not: SUFFIX [--no-overlap]
    "$bin/arbor" bench constrained --device cuda --model "$work/smollm2.gguf" --batch 1,8,64 --max-tokens 48 \
      --reps 2 --partial-documents "${@:2}" --json >"$out/bench_constrained$1.json"
  }
  run bench_constrained "$out/bench_constrained.json" bench_constrained ""
  run bench_constrained_no_overlap "$out/bench_constrained_no_overlap.json" bench_constrained _no_overlap --no-overlap
  bench_decode_gemv_up_to() {  # ROWS: the 8B shape's decode at 1-8 rows, the GEMV taking up to ROWS of them
    ARBOR_CUDA_GEMV_MAX_ROWS=$1 "$bin/arbor" bench engine --device cuda --model "$work/llama3-8b.gguf" --reps 1 \
      --prompt 512 --batch 1,2,4,8 --json >"$out/bench_engine_llama3_8b_gemv_up_to_$1.json"
  }
  run bench_engine_llama3_8b_gemv_up_to_8 "$out/bench_engine_llama3_8b_gemv_up_to_8.json" bench_decode_gemv_up_to 8
  run bench_engine_llama3_8b_gemv_up_to_0 "$out/bench_engine_llama3_8b_gemv_up_to_0.json" bench_decode_gemv_up_to 0
fi

total=$(( $(date +%s) - started ))
printf '{"total_seconds": %s, "ok": %s, "steps": [%s]}\n' "$total" "$([ $failed = 0 ] && echo true || echo false)" \
  "$steps_json" >"$out/device_check.json"
echo "[device_check] done in ${total}s: $out/device_check.json"
exit $failed
