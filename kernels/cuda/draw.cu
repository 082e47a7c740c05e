// Each row's next token, drawn on the device (see draw.hpp): one block a row. A greedy
// row is one argmax pass; a sampled row makes a few more over its logits (from L2):
// the maximum, four radix passes for the top-k cut, the weights, four radix passes for
// the top-p cut, the draw.
#include "kernels/cuda/draw.hpp"

namespace arbor::kernels::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kBins = 256;  // a radix pass decides a byte
constexpr float kFixedOne = 1099511627776.0f;  // 2^40: a weight of 1 in fixed point

using Amount = unsigned long long;

// A weight in (0, 1] as a fixed-point amount (weights under 2^-40 count as 0). Exact:
// the scale is a power of two.
__device__ __forceinline__ Amount fixed_point(float w) { return Amount(w * kFixedOne); }

// A candidate maximum: the value and its index; index -1 for none yet (NaNs never are).
struct Best {
  float value;
  int index;
};

// Whether b beats a: larger, or equal at a lower index (the CPU's tie rule).
__device__ __forceinline__ bool beats(Best b, Best a) {
  return b.index >= 0 && (a.index < 0 || b.value > a.value || (b.value == a.value && b.index < a.index));
}

__device__ __forceinline__ Best warp_best(Best v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const Best other{__shfl_xor_sync(0xffffffffu, v.value, offset), __shfl_xor_sync(0xffffffffu, v.index, offset)};
    if (beats(other, v)) v = other;
  }
  return v;
}

// The row's largest value and its index, in every thread: each thread scans a stride
// (ascending, so `>` keeps its lowest index), then warps and the block reduce with the
// same rule. Index -1 when every value is NaN.
__device__ Best row_best(const float* xr, int n) {
  __shared__ Best partial[32];
  Best best{0.f, -1};
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = xr[i];
    if (!isnan(v) && (best.index < 0 || v > best.value)) best = {v, i};
  }
  best = warp_best(best);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = best;
  __syncthreads();
  best = lane < int(blockDim.x / 32) ? partial[lane] : Best{0.f, -1};
  best = warp_best(best);
  __syncthreads();  // partial is read before anyone may write it again
  return best;
}

// An unsigned key in the order of the logits (NaN ranks as -infinity, -0 as +0, as
// float comparison has them).
__device__ __forceinline__ unsigned logit_key(float v) {
  if (isnan(v)) v = -INFINITY;
  if (v == 0.f) v = 0.f;
  const unsigned bits = __float_as_uint(v);
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

// The largest key K such that the elements with key >= K amount to `target` or more
// (model/token_draw.hpp's cuts: top-k counts, top-p masses). Four passes over the row,
// a byte of K each from the top; a pass histograms the amounts of the elements whose
// higher bytes match K's so far (integer sums: the same whatever the order). When the
// whole amount falls short of `target`, K ends below every key (every element kept).
// element(i, key, amount): whether element i takes part, with its key and amount.
template <class Element>
__device__ unsigned largest_key_reaching(int n, Amount target, Element element) {
  __shared__ Amount histogram[kBins];
  __shared__ unsigned chosen_prefix;
  __shared__ Amount chosen_above;
  unsigned prefix = 0, mask = 0;
  Amount above = 0;  // the amount of the elements whose keys are above every one left
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) histogram[b] = 0;
    __syncthreads();
    // A thread adds a run of elements in one bin at once: a row's top bytes are few,
    // and an atomic per element would queue on them.
    int run_bin = -1;
    Amount run = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      unsigned key;
      Amount amount;
      if (!element(i, key, amount) || (key & mask) != prefix) continue;
      const int bin = int((key >> shift) & 0xffu);
      if (bin != run_bin) {
        if (run_bin >= 0) atomicAdd(&histogram[run_bin], run);
        run_bin = bin;
        run = 0;
      }
      run += amount;
    }
    if (run_bin >= 0) atomicAdd(&histogram[run_bin], run);
    __syncthreads();
    if (threadIdx.x == 0) {
      int b = kBins - 1;
      for (; b > 0; --b) {
        if (histogram[b] > 0 && above + histogram[b] >= target) break;
        above += histogram[b];
      }
      chosen_prefix = prefix | (unsigned(b) << shift);
      chosen_above = above;
    }
    __syncthreads();
    prefix = chosen_prefix;
    above = chosen_above;
    mask |= 0xffu << shift;
    __syncthreads();  // read before thread 0 writes them again
  }
  return prefix;
}

// Exclusive prefix sum of one amount per thread, in thread order; the block's total
// in *total (every thread).
__device__ Amount exclusive_scan(Amount v, Amount* total) {
  __shared__ Amount warp_totals[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = int(blockDim.x / 32);
  Amount inclusive = v;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const Amount up = __shfl_up_sync(0xffffffffu, inclusive, unsigned(d));
    if (lane >= d) inclusive += up;
  }
  if (lane == 31) warp_totals[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    Amount t = lane < warps ? warp_totals[lane] : 0;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const Amount up = __shfl_up_sync(0xffffffffu, t, unsigned(d));
      if (lane >= d) t += up;
    }
    if (lane < warps) warp_totals[lane] = t;  // inclusive, over warps
  }
  __syncthreads();
  const Amount before = (warp > 0 ? warp_totals[warp - 1] : 0) + inclusive - v;
  *total = warp_totals[warps - 1];
  __syncthreads();
  return before;
}

// Steps 3-5 of the rule for a sampled row whose largest logit, `best`, is finite:
// weights in place (0 below the top-k key), the top-p cut, the draw in id order.
__device__ int draw_sampled(float* xr, int n, const RowDraw& d, Best best) {
  const float max = best.value;
  unsigned min_key = 0;
  if (d.top_k > 0 && d.top_k < n)
    min_key = largest_key_reaching(n, Amount(d.top_k), [&](int i, unsigned& key, Amount& amount) {
      key = logit_key(xr[i]);
      amount = 1;
      return true;
    });
  __syncthreads();
  const float inv_t = 1.f / d.temperature;
  Amount mass = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float l = xr[i];
    const bool weighed = logit_key(l) >= min_key && isfinite(l);
    const float w = weighed ? expf((l - max) * inv_t) : 0.f;
    xr[i] = w;
    mass += fixed_point(w);
  }
  Amount total = 0;
  exclusive_scan(mass, &total);  // also orders the weights' writes before the reads below
  unsigned min_bits = 0;         // positive floats order as their bits
  if (d.top_p < 1.f) {
    const Amount target = Amount(double(total) * double(fmaxf(d.top_p, 0.f)));
    min_bits = largest_key_reaching(n, target, [&](int i, unsigned& key, Amount& amount) {
      const float w = xr[i];
      key = __float_as_uint(w);
      amount = fixed_point(w);
      return w > 0.f;
    });
  }
  // The draw: each thread sums its own contiguous slice of kept weights; the scan says
  // which slice holds the target, and that thread walks it.
  const int slice = (n + int(blockDim.x) - 1) / int(blockDim.x);
  const int begin = min(n, int(threadIdx.x) * slice), end = min(n, begin + slice);
  auto kept_amount = [&](int i) {
    const float w = xr[i];
    return w > 0.f && __float_as_uint(w) >= min_bits ? fixed_point(w) : Amount(0);
  };
  Amount own = 0;
  for (int i = begin; i < end; ++i) own += kept_amount(i);
  Amount kept = 0;
  Amount running = exclusive_scan(own, &kept);
  Amount target = Amount(double(kept) * double(d.uniform));
  if (target >= kept) target = kept - 1;  // rounding
  __shared__ int drawn;
  if (threadIdx.x == 0) drawn = best.index;  // the largest weight, 1, makes kept > target: never left
  __syncthreads();
  if (running <= target && target < running + own)
    for (int i = begin; i < end; ++i) {
      running += kept_amount(i);
      if (running > target) {
        drawn = i;
        break;
      }
    }
  __syncthreads();
  return drawn;
}

__global__ void __launch_bounds__(kThreads) draw_rows_kernel(float* __restrict__ x, const RowDraw* __restrict__ draws,
                                                              int n, std::int32_t* __restrict__ out) {
  float* xr = x + std::int64_t(blockIdx.x) * n;
  const RowDraw d = draws[blockIdx.x];
  const Best best = row_best(xr, n);
  int token = best.index < 0 ? 0 : best.index;
  // An infinite maximum takes all the mass (the host rule's argmax too).
  if (best.index >= 0 && isfinite(best.value) && d.temperature > 0.f && d.top_k != 1)
    token = draw_sampled(xr, n, d, best);
  if (threadIdx.x == 0) out[blockIdx.x] = token;
}

// One thread a logit of a masked row (blockIdx.y: which of them).
__global__ void mask_rows_kernel(float* __restrict__ x, const std::int32_t* __restrict__ masked_rows,
                                 const std::uint32_t* __restrict__ words, int words_per_row, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const std::uint32_t w = words[std::int64_t(blockIdx.y) * words_per_row + i / 32];
  if (!((w >> (i % 32)) & 1u)) x[std::int64_t(masked_rows[blockIdx.y]) * n + i] = -INFINITY;
}

}  // namespace

void mask_rows(float* x, const std::int32_t* masked_rows, const std::uint32_t* words, int num_masked,
               int words_per_row, int n, cudaStream_t stream) {
  constexpr unsigned kMaskThreads = 256;
  if (num_masked > 0 && n > 0)
    mask_rows_kernel<<<dim3((unsigned(n) + kMaskThreads - 1) / kMaskThreads, unsigned(num_masked)), kMaskThreads, 0,
                       stream>>>(x, masked_rows, words, words_per_row, n);
}

void draw_rows(float* x, const RowDraw* draws, int rows, int n, std::int32_t* out, cudaStream_t stream) {
  if (rows > 0) draw_rows_kernel<<<unsigned(rows), kThreads, 0, stream>>>(x, draws, n, out);
}

}  // namespace arbor::kernels::cuda
