#include "kernels/cpu/dequantize.hpp"

#include <cstring>

#include "kernels/cpu/fp16.hpp"

namespace arbor::kernels::cpu {
namespace {

void dequant_q4_0(const BlockQ4_0* b, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = float((b[i].qs[j] & 0xF) - 8) * d;
      y[j + 16] = float((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequant_q4_1(const BlockQ4_1* b, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = float(b[i].qs[j] & 0xF) * d + m;
      y[j + 16] = float(b[i].qs[j] >> 4) * d + m;
    }
  }
}

void dequant_q8_0(const BlockQ8_0* b, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < 32; ++j) y[j] = float(b[i].qs[j]) * d;
  }
}

// 6-bit scale and min j (0..7) of a Q4_K super-block, packed in 12 bytes.
void q4k_scale_min(int j, const std::uint8_t* q, int& sc, int& mn) {
  if (j < 4) {
    sc = q[j] & 63;
    mn = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void dequant_q4_k(const BlockQ4_K* b, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
    const std::uint8_t* q = b[i].qs;
    for (int j = 0; j < 4; ++j, q += 32) {  // 64 values per step: two sub-blocks
      int sc, mn;
      q4k_scale_min(2 * j, b[i].scales, sc, mn);
      const float d1 = d * float(sc), m1 = dmin * float(mn);
      q4k_scale_min(2 * j + 1, b[i].scales, sc, mn);
      const float d2 = d * float(sc), m2 = dmin * float(mn);
      for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
    }
  }
}

void dequant_q6_k(const BlockQ6_K* b, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    const std::uint8_t* ql = b[i].ql;
    const std::uint8_t* qh = b[i].qh;
    const std::int8_t* sc = b[i].scales;
    for (int n = 0; n < 2; ++n, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * float(sc[is]) * float(q1);
        y[l + 32] = d * float(sc[is + 2]) * float(q2);
        y[l + 64] = d * float(sc[is + 4]) * float(q3);
        y[l + 96] = d * float(sc[is + 6]) * float(q4);
      }
    }
  }
}

}  // namespace

void dequantize_row(GgmlType type, const void* src, float* dst, std::int64_t n) {
  switch (type) {
    case GgmlType::F32: std::memcpy(dst, src, std::size_t(n) * 4); return;
    case GgmlType::F16: {
      const auto* h = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
      return;
    }
    case GgmlType::BF16: {
      const auto* h = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
      return;
    }
    case GgmlType::Q4_0: dequant_q4_0(static_cast<const BlockQ4_0*>(src), dst, n / 32); return;
    case GgmlType::Q4_1: dequant_q4_1(static_cast<const BlockQ4_1*>(src), dst, n / 32); return;
    case GgmlType::Q8_0: dequant_q8_0(static_cast<const BlockQ8_0*>(src), dst, n / 32); return;
    case GgmlType::Q4_K: dequant_q4_k(static_cast<const BlockQ4_K*>(src), dst, n / 256); return;
    case GgmlType::Q6_K: dequant_q6_k(static_cast<const BlockQ6_K*>(src), dst, n / 256); return;
  }
  std::memset(dst, 0, std::size_t(n) * 4);
}

}  // namespace arbor::kernels::cpu
