#!/usr/bin/env bash
# Builds, here, what scripts/device_check.sh runs on a GPU machine that lacks Arbor's C++
# dependencies (CAF, sentencepiece, ...): the CUDA build's test executables and `arbor`,
# plus the shared libraries they need that are not CUDA's or the C/C++ runtime's, in
# .device_bundle/ (ignored by git). Carry that folder to the device machine.
#   scripts/device_bundle.sh            # -DCMAKE_CUDA_ARCHITECTURES=90 (H100/H200)
#   ARBOR_CUDA_ARCH=80 scripts/device_bundle.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${ARBOR_CUDA_BUILD_DIR:-$root/build-cuda}"
bundle="$root/.device_bundle"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DARBOR_CUDA=ON -DARBOR_BENCH=OFF \
    -DCMAKE_CUDA_ARCHITECTURES="${ARBOR_CUDA_ARCH:-90}" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
cmake --build "$build" -j "${ARBOR_JOBS:-2}" --target arbor arbor_kernels_tests arbor_model_tests arbor_runtime_tests
rm -rf "$bundle"
mkdir -p "$bundle/lib"
cp "$build/arbor" "$build"/tests/arbor_{kernels,model,runtime}_tests "$bundle/"
strip "$bundle"/arbor "$bundle"/arbor_*_tests
# Shared libraries from the distribution that the GPU image may not have; CUDA's own
# (cudart, cublas) and glibc/libstdc++ are there.
for exe in "$bundle"/arbor "$bundle"/arbor_*_tests; do
  ldd "$exe" | awk '/=> \// {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so|libcuda|libcublas|libcudart' |
  while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
du -sh "$bundle"
