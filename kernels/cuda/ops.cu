// Element-wise and row-wise ops (see ops.hpp). Simple one-pass kernels: a block per
// row where a row reduction is needed, a thread per element otherwise.
#include "kernels/cuda/ops.hpp"
#include "kernels/cuda/quant.cuh"

namespace arbor::kernels::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::int64_t n) { return unsigned((n + kThreads - 1) / kThreads); }

// One block per row; each thread dequantizes whole 32-value blocks of the row (F32
// rows, whose length need not be a multiple of 32, are copied element by element).
__global__ void embed_kernel(DeviceMatrix table, const std::int32_t* __restrict__ tokens,
                             const std::int32_t* __restrict__ futures, float* __restrict__ out) {
  const int r = blockIdx.x;
  const std::int32_t token = tokens[r] >= 0 ? tokens[r] : futures[-(tokens[r] + 1)];
  if (table.type == GgmlType::F32) {
    const float* src = static_cast<const float*>(table.data) + std::int64_t(token) * table.cols;
    for (std::int64_t c = threadIdx.x; c < table.cols; c += blockDim.x) out[std::int64_t(r) * table.cols + c] = src[c];
    return;
  }
  const std::int64_t num_blocks = table.cols / 32;
  float v[32];
  for (std::int64_t b = threadIdx.x; b < num_blocks; b += blockDim.x) {
    dequantize_block(table, token, b, v);
    float* dst = out + std::int64_t(r) * table.cols + b * 32;
#pragma unroll
    for (int j = 0; j < 32; ++j) dst[j] = v[j];
  }
}

// Block-wide sum (blockDim.x a multiple of 32, at most 1024).
__device__ float block_sum(float v) {
  __shared__ float partial[32];
  v = warp_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int num_warps = blockDim.x / 32;
  v = lane < num_warps ? partial[lane] : 0.f;
  v = warp_sum(v);  // every warp computes the total
  __syncthreads();  // partial may be reused by the caller's next block_sum
  return v;
}

__global__ void rmsnorm_kernel(const float* __restrict__ x, const float* __restrict__ weight, int n, float eps,
                               float* __restrict__ out) {
  const float* xr = x + std::int64_t(blockIdx.x) * n;
  float* yr = out + std::int64_t(blockIdx.x) * n;
  float ss = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
  const float inv = rsqrtf(block_sum(ss) / float(n) + eps);
  for (int i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] * inv * weight[i];
}

__global__ void add_rmsnorm_kernel(float* __restrict__ x, const float* __restrict__ y,
                                   const float* __restrict__ weight, int n, float eps, float* __restrict__ out) {
  float* xr = x + std::int64_t(blockIdx.x) * n;
  const float* yr = y + std::int64_t(blockIdx.x) * n;
  float* o = out + std::int64_t(blockIdx.x) * n;
  float ss = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = xr[i] + yr[i];
    xr[i] = v;
    ss += v * v;
  }
  const float inv = rsqrtf(block_sum(ss) / float(n) + eps);
  for (int i = threadIdx.x; i < n; i += blockDim.x) o[i] = xr[i] * inv * weight[i];  // this thread's own writes
}

// (a, b) rotated by the angle whose cosine and sine are c and s.
__device__ __forceinline__ void rotate(float a, float b, float c, float s, float& x, float& y) {
  x = a * c - b * s;
  y = a * s + b * c;
}

// One thread per (row, head, pair of adjacent elements), over the q heads then the kv
// heads. The angle is computed in double precision, as the CPU's table is, then
// rounded to float; pairs past rot_dim keep their values (cos 1, sin 0: exact).
__global__ void rope_store_kv_kernel(float* q, const float* __restrict__ k, const float* __restrict__ v,
                                     const std::int32_t* __restrict__ positions, int rows, int num_q_heads,
                                     int rot_dim, float theta, const std::int32_t* __restrict__ row_page,
                                     const std::int32_t* __restrict__ row_slot, KvLayerView kv) {
  const int head_dim = kv.head_dim, pairs = (head_dim + 1) / 2, heads = num_q_heads + kv.num_kv_heads;
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= std::int64_t(rows) * heads * pairs) return;
  const int pair = int(i % pairs), head = int((i / pairs) % heads), r = int(i / (std::int64_t(pairs) * heads));
  const int d = 2 * pair;
  const bool has_second = d + 1 < head_dim;
  float c = 1.f, s = 0.f;
  if (d < rot_dim) {
    const double angle = double(positions[r]) * pow(double(theta), -double(d) / rot_dim);
    c = float(cos(angle));
    s = float(sin(angle));
  }
  if (head < num_q_heads) {
    float* x = q + (std::int64_t(r) * num_q_heads + head) * head_dim + d;
    float first, second;
    rotate(x[0], has_second ? x[1] : 0.f, c, s, first, second);
    x[0] = first;
    if (has_second) x[1] = second;
    return;
  }
  if (row_page[r] < 0) return;  // a padding row: nothing stored
  const int h = head - num_q_heads;
  const std::int64_t src = (std::int64_t(r) * kv.num_kv_heads + h) * head_dim + d;
  const std::int64_t within = (std::int64_t(h) * kv.page_size + row_slot[r]) * head_dim + d;
  std::uint16_t* page = kv.kv_base + std::int64_t(row_page[r]) * kv.elements_per_page;
  float first, second;
  rotate(k[src], has_second ? k[src + 1] : 0.f, c, s, first, second);
  page[kv.k_offset + within] = __half_as_ushort(__float2half_rn(first));
  page[kv.v_offset + within] = __half_as_ushort(__float2half_rn(v[src]));
  if (has_second) {
    page[kv.k_offset + within + 1] = __half_as_ushort(__float2half_rn(second));
    page[kv.v_offset + within + 1] = __half_as_ushort(__float2half_rn(v[src + 1]));
  }
}

__global__ void silu_mul_kernel(float* gate, const float* __restrict__ up, std::int64_t n) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  gate[i] = silu_times(gate[i], up[i]);
}

__global__ void add_kernel(float* x, const float* __restrict__ y, std::int64_t n) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += y[i];
}

__global__ void gather_kernel(const float* __restrict__ x, const std::int32_t* __restrict__ rows, int num_rows, int n,
                              float* __restrict__ out) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= std::int64_t(num_rows) * n) return;
  const std::int64_t r = i / n, c = i % n;
  out[i] = x[std::int64_t(rows[r]) * n + c];
}

}  // namespace

void embed(const DeviceMatrix& table, const std::int32_t* tokens, const std::int32_t* futures, int rows, float* out,
           cudaStream_t stream) {
  if (rows > 0) embed_kernel<<<unsigned(rows), 128, 0, stream>>>(table, tokens, futures, out);
}

void rmsnorm(const float* x, const float* weight, int rows, int n, float eps, float* out, cudaStream_t stream) {
  if (rows > 0) rmsnorm_kernel<<<unsigned(rows), kThreads, 0, stream>>>(x, weight, n, eps, out);
}

void add_rmsnorm(float* x, const float* y, const float* weight, int rows, int n, float eps, float* out,
                 cudaStream_t stream) {
  if (rows > 0) add_rmsnorm_kernel<<<unsigned(rows), kThreads, 0, stream>>>(x, y, weight, n, eps, out);
}

void silu_mul(float* gate, const float* up, std::int64_t n, cudaStream_t stream) {
  if (n > 0) silu_mul_kernel<<<blocks_for(n), kThreads, 0, stream>>>(gate, up, n);
}

void add_inplace(float* x, const float* y, std::int64_t n, cudaStream_t stream) {
  if (n > 0) add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n);
}

void gather_rows(const float* x, const std::int32_t* rows, int num_rows, int n, float* out, cudaStream_t stream) {
  const std::int64_t total = std::int64_t(num_rows) * n;
  if (total > 0) gather_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, rows, num_rows, n, out);
}

void rope_store_kv(float* q, const float* k, const float* v, const std::int32_t* positions, int rows,
                   int num_q_heads, int rot_dim, float theta, const std::int32_t* row_page,
                   const std::int32_t* row_slot, const KvLayerView& kv, cudaStream_t stream) {
  const std::int64_t n = std::int64_t(rows) * (num_q_heads + kv.num_kv_heads) * ((kv.head_dim + 1) / 2);
  if (n > 0)
    rope_store_kv_kernel<<<blocks_for(n), kThreads, 0, stream>>>(q, k, v, positions, rows, num_q_heads, rot_dim,
                                                                 theta, row_page, row_slot, kv);
}

}  // namespace arbor::kernels::cuda
