// The CUDA emulator's stand-in for the toolkit's mma.h: the warp matrix functions
// (nvcuda::wmma) for 16x16x16 tiles of f16 inputs and f32 accumulators, the shape the
// backend uses.
//
// On a GPU a fragment is spread over the warp's 32 lanes in a layout CUDA leaves
// unspecified; code may only load, fill, multiply and store it. Here lane l holds the
// accumulator elements of tile row l / 2, columns 8 (l % 2) .. + 7, and the inputs those
// need (row l / 2 of A, those 8 columns of B), so the warp computes each product once.
// mma_sync is a warp barrier (a warp that diverges around it stops the program, as the
// warp-collective functions require), and loads and stores check CUDA's alignment rules:
// a 256-bit aligned pointer, ldm a multiple of 16 bytes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "cuda_emulator.hpp"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulator has the 16x16x16 shape only");
  // matrix_a: this lane's row of A (16 values); matrix_b: its 8 columns of B (8 x 16,
  // column-major); accumulator: its 8 elements of one row.
  float x[std::is_same_v<Use, matrix_b> ? 128 : std::is_same_v<Use, matrix_a> ? 16 : 8];
  static constexpr int num_elements = int(sizeof(x) / sizeof(float));
};

namespace detail {

inline int tile_row() { return cuda_emulator::lane_id() / 2; }
inline int tile_col0() { return 8 * (cuda_emulator::lane_id() % 2); }

inline void check_access(const void* p, unsigned ldm, std::size_t element, const char* what) {
  if (reinterpret_cast<std::uintptr_t>(p) % 32 != 0 || (ldm * element) % 16 != 0) {
    std::fprintf(stderr, "cuda emulator: %s with a pointer not 256-bit aligned or ldm %u not a multiple of 16 "
                 "bytes\n", what, ldm);
    std::abort();
  }
}

inline float value(float v) { return v; }
inline float value(__half v) { return __half2float(v); }

// Element (r, c) of a matrix at p with leading dimension ldm.
template <class T>
float at(const T* p, unsigned ldm, bool row_major, int r, int c) {
  return value(row_major ? p[std::size_t(r) * ldm + c] : p[std::size_t(c) * ldm + r]);
}

}  // namespace detail

template <class T, class Layout>
void load_matrix_sync(fragment<matrix_a, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm) {
  detail::check_access(p, ldm, sizeof(T), "wmma::load_matrix_sync (matrix_a)");
  const bool row_major = std::is_same_v<Layout, nvcuda::wmma::row_major>;
  for (int k = 0; k < 16; ++k) f.x[k] = detail::at(p, ldm, row_major, detail::tile_row(), k);
}

template <class T, class Layout>
void load_matrix_sync(fragment<matrix_b, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm) {
  detail::check_access(p, ldm, sizeof(T), "wmma::load_matrix_sync (matrix_b)");
  const bool row_major = std::is_same_v<Layout, nvcuda::wmma::row_major>;
  for (int c = 0; c < 8; ++c)
    for (int k = 0; k < 16; ++k) f.x[c * 16 + k] = detail::at(p, ldm, row_major, k, detail::tile_col0() + c);
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm,
                             layout_t layout) {
  detail::check_access(p, ldm, sizeof(float), "wmma::load_matrix_sync (accumulator)");
  for (int n = 0; n < 8; ++n)
    f.x[n] = detail::at(p, ldm, layout == mem_row_major, detail::tile_row(), detail::tile_col0() + n);
}

inline void fill_fragment(fragment<accumulator, 16, 16, 16, float>& f, float v) {
  for (float& e : f.x) e = v;
}

// d = a b + c, products summed in f32.
template <class T, class LA, class LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, T, LA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LB>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
  __syncwarp();
  for (int n = 0; n < 8; ++n) {
    float sum = c.x[n];
    for (int k = 0; k < 16; ++k) sum += a.x[k] * b.x[n * 16 + k];
    d.x[n] = sum;
  }
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm,
                              layout_t layout) {
  detail::check_access(p, ldm, sizeof(float), "wmma::store_matrix_sync");
  const int r = detail::tile_row();
  for (int n = 0; n < 8; ++n) {
    const int c = detail::tile_col0() + n;
    (layout == mem_row_major ? p[std::size_t(r) * ldm + c] : p[std::size_t(c) * ldm + r]) = f.x[n];
  }
}

}  // namespace nvcuda::wmma
