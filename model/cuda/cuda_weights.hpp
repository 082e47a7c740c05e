// A Llama model's weights uploaded once to a CUDA device. Q4_0, Q4_1 and Q8_0 matrices
// stay quantized (rearranged into the device layout of kernels/cuda/device_matrix.hpp:
// quants and scales in two planes, for 128-bit loads); F32 ones are copied; F16, BF16, Q4_K
// and Q6_K ones are dequantized to F32 on the host first (simpler than a kernel per
// type; costs device memory: 4 bytes per value). Norm vectors are F32.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "common/result.hpp"
#include "kernels/cuda/buffer.hpp"
#include "kernels/cuda/device_matrix.hpp"
#include "model/llama_config.hpp"
#include "model/llama_weights.hpp"

namespace arbor::model {

struct CudaLayerWeights {
  const float* attn_norm = nullptr;
  kernels::cuda::DeviceMatrix wq, wk, wv, wo;
  const float* ffn_norm = nullptr;
  kernels::cuda::DeviceMatrix gate, up, down;
};

class CudaWeights {
 public:
  // Uploads every tensor to the current device; out_of_memory naming the tensor and the
  // bytes when the device is full.
  static Result<std::unique_ptr<CudaWeights>> upload(const LlamaConfig& config, const LlamaWeights& weights);

  kernels::cuda::DeviceMatrix token_embd, output;  // output == token_embd when tied
  const float* output_norm = nullptr;
  std::vector<CudaLayerWeights> layers;
  std::size_t device_bytes = 0;

  // Whether products of `rows` activation rows with every matrix launch kernels only
  // (kernels::cuda::Matmul::kernels_only): a step of that many rows may be a CUDA graph.
  bool kernels_only(std::int64_t rows) const;

 private:
  Result<kernels::cuda::DeviceMatrix> matrix(const kernels::WeightMatrix& w, const char* name);
  Result<const float*> vector(const float* host, std::int64_t n, const char* name);

  std::vector<kernels::cuda::DeviceBuffer> buffers_;
  std::unordered_map<const void*, kernels::cuda::DeviceMatrix> uploaded_;  // host data -> device copy
};

}  // namespace arbor::model
