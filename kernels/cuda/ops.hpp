// The element-wise and row-wise ops of the transformer on a CUDA device, each the
// device twin of kernels/cpu/ops.hpp (the cross-backend tests hold them to it).
// Every pointer is device memory; every launch is asynchronous on `stream` (errors
// surface at the caller's next synchronising check). Rows are row-major, contiguous.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/device_matrix.hpp"

namespace arbor::kernels::cuda {

// out[r] = row tokens[r] of `table` as f32 (table.type: Q4_0, Q4_1, Q8_0 or F32). A
// negative token is a future one (model::future_token): its id is futures[-token - 1],
// written by the step before (null when no token is negative).
void embed(const DeviceMatrix& table, const std::int32_t* tokens, const std::int32_t* futures, int rows, float* out,
           cudaStream_t stream);

// out[r][i] = x[r][i] / sqrt(mean_i(x[r]^2) + eps) * weight[i], for rows of n values.
void rmsnorm(const float* x, const float* weight, int rows, int n, float eps, float* out, cudaStream_t stream);
// The residual add and the next norm in one pass: x[r] += y[r], then out[r] =
// rmsnorm(x[r]) as above (one launch instead of two at each sub-layer boundary).
void add_rmsnorm(float* x, const float* y, const float* weight, int rows, int n, float eps, float* out,
                 cudaStream_t stream);

// gate[i] = silu(gate[i]) * up[i] (SwiGLU), for i < n.
void silu_mul(float* gate, const float* up, std::int64_t n, cudaStream_t stream);
// x[i] += y[i], for i < n (the residual).
void add_inplace(float* x, const float* y, std::int64_t n, cudaStream_t stream);
// out[i] = x[rows[i]] for i < num_rows, rows of n values (the rows that need logits).
void gather_rows(const float* x, const std::int32_t* rows, int num_rows, int n, float* out, cudaStream_t stream);
// Where one layer's K and V rows live in the KV pool: page p starts at
// kv_base + p * elements_per_page (f16 elements); within it the layer's K block starts
// at k_offset and its V block at v_offset, each [num_kv_heads][page_size][head_dim]
// (cache/kv_geometry.hpp).
struct KvLayerView {
  std::uint16_t* kv_base = nullptr;
  std::int64_t elements_per_page = 0;
  std::int64_t k_offset = 0, v_offset = 0;
  int num_kv_heads = 0, head_dim = 0, page_size = 0;
};

// RoPE and the K/V store of one layer in one launch. Rotates adjacent pairs (x[2i],
// x[2i+1]) of each head by positions[r] * theta^(-2i / rot_dim), for 2i < rot_dim (the
// GGUF Llama layout: its converter permutes Q/K rows so that adjacent pairs rotate; as
// kernels::cpu::rope): q ([rows][num_q_heads * head_dim]) in place, and k on its way to
// the pool: row r of the rotated k and of v ([rows][num_kv_heads * head_dim] f32) go as
// f16 into slot row_slot[r] of physical page row_page[r] (KV rule 9: position p lives in
// page p / page_size at slot p % page_size, resolved through the page table by the
// caller); a row whose row_page is negative (a padding row) stores nothing. k and v
// themselves are left as they are.
void rope_store_kv(float* q, const float* k, const float* v, const std::int32_t* positions, int rows,
                   int num_q_heads, int rot_dim, float theta, const std::int32_t* row_page,
                   const std::int32_t* row_slot, const KvLayerView& kv, cudaStream_t stream);

}  // namespace arbor::kernels::cuda
