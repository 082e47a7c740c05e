// The CUDA engine: the forward pass of model/engine.hpp on one CUDA device. Weights are
// uploaded once (model/cuda/cuda_weights.hpp); the KV pool lives in device memory from
// its page_allocator() (model/cuda/cuda_page_allocator.hpp), in the host pool's page
// layout; activations stay on the device; logits come back to the host, except a
// token row's (LogitsMode::last_token): its token is drawn on the device, greedy or
// sampled (kernels/cuda/draw.hpp).
//
// A step: upload the batch's tokens, positions and page tables; embed, RMSNorm; per
// layer Q/K/V matmuls (one GEMV launch in decode), RoPE + K/V scatter into the pages
// (one kernel), paged attention, output matmul, residual + RMSNorm (one kernel), SwiGLU
// FFN (gate, up and their gating: one GEMV launch in decode), residual + the next layer's RMSNorm
// (one kernel); final norm of the rows that want logits, the vocabulary
// matmul, the token rows' draws, copy back. Kernels in kernels/cuda/.
#pragma once

#include <memory>

#include "common/result.hpp"
#include "kernels/weight_matrix.hpp"
#include "model/engine.hpp"
#include "model/llama_weights.hpp"

namespace arbor::model {

// Uploads the weights to device 0 and builds the engine; out_of_memory (what did not
// fit) or internal (a CUDA error) otherwise. `config` and `weights` must outlive it.
// `precision`: accurate keeps the decode GEMV's activations f32; fast rounds them to
// int8 per 32 values (as the CPU's fast int8 matmuls and llama.cpp do) for __dp4a
// products (kernels/cuda/matmul.hpp).
Result<std::unique_ptr<Engine>> make_cuda_engine(const LlamaConfig& config, const LlamaWeights& weights,
                                                 kernels::MatmulPrecision precision = kernels::MatmulPrecision::accurate);

}  // namespace arbor::model
