#include "model/cuda/cuda_weights.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "kernels/cpu/dequantize.hpp"
#include "kernels/cuda/device.hpp"
#include "kernels/cuda/matmul.hpp"

namespace arbor::model {
namespace {

using kernels::GgmlType;
using kernels::cuda::DeviceBuffer;
using kernels::cuda::DeviceMatrix;

Result<void> copy_to_device(void* dst, const void* src, std::size_t bytes, const char* name) {
  if (const cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice); e != cudaSuccess)
    return fail(ErrorCode::internal, std::string("uploading '") + name + "': " +
                                         kernels::cuda::error_text("cudaMemcpy", e));
  return {};
}

Result<void> reserve(DeviceBuffer& buffer, std::size_t bytes, const char* name) {
  std::string error;
  if (!buffer.reserve(bytes, &error))
    return fail(ErrorCode::out_of_memory, std::string("CUDA engine: no device memory for weight '") + name +
                                              "' (" + error + "); the model does not fit this device");
  return {};
}

}  // namespace

Result<DeviceMatrix> CudaWeights::matrix(const kernels::WeightMatrix& w, const char* name) {
  if (auto it = uploaded_.find(w.data); it != uploaded_.end()) return it->second;  // tied output
  const bool as_stored = kernels::cuda::is_device_type(w.type);
  const GgmlType type = as_stored ? w.type : GgmlType::F32;
  const std::size_t row_bytes = kernels::row_bytes(type, w.cols);
  DeviceBuffer& buffer = buffers_.emplace_back();
  if (auto ok = reserve(buffer, row_bytes * std::size_t(w.rows), name); !ok) return std::unexpected(ok.error());
  if (as_stored) {  // rearranged into the device layout (device_matrix.hpp) on the way
    std::string error;
    if (!kernels::cuda::upload_matrix(type, w.data, w.rows, w.cols, buffer, &error))
      return fail(ErrorCode::internal, std::string("uploading '") + name + "': " + error);
  } else {  // dequantize on the host, a few MiB of rows at a time
    const std::int64_t chunk = std::max<std::int64_t>(1, (std::int64_t(8) << 20) / (w.cols * 4));
    std::vector<float> rows(std::size_t(chunk * w.cols));
    const std::size_t stored_row_bytes = kernels::row_bytes(w.type, w.cols);
    for (std::int64_t r0 = 0; r0 < w.rows; r0 += chunk) {
      const std::int64_t n = std::min(chunk, w.rows - r0);
      for (std::int64_t r = 0; r < n; ++r)
        kernels::cpu::dequantize_row(w.type, static_cast<const std::uint8_t*>(w.data) + std::size_t(r0 + r) * stored_row_bytes,
                                     &rows[std::size_t(r * w.cols)], w.cols);
      if (auto ok = copy_to_device(buffer.as<char>() + std::size_t(r0) * row_bytes, rows.data(),
                                   std::size_t(n) * row_bytes, name);
          !ok)
        return std::unexpected(ok.error());
    }
  }
  device_bytes += buffer.size();
  const DeviceMatrix m{type, buffer.data(), w.rows, w.cols};
  uploaded_.emplace(w.data, m);
  return m;
}

Result<const float*> CudaWeights::vector(const float* host, std::int64_t n, const char* name) {
  DeviceBuffer& buffer = buffers_.emplace_back();
  if (auto ok = reserve(buffer, std::size_t(n) * sizeof(float), name); !ok) return std::unexpected(ok.error());
  if (auto ok = copy_to_device(buffer.data(), host, std::size_t(n) * sizeof(float), name); !ok)
    return std::unexpected(ok.error());
  device_bytes += buffer.size();
  return buffer.as<const float>();
}

Result<std::unique_ptr<CudaWeights>> CudaWeights::upload(const LlamaConfig& c, const LlamaWeights& w) {
  std::unique_ptr<CudaWeights> d(new CudaWeights);
  auto put = [&](DeviceMatrix& dst, const kernels::WeightMatrix& src, const std::string& name) -> Result<void> {
    auto m = d->matrix(src, name.c_str());
    if (!m) return std::unexpected(m.error());
    dst = *m;
    return {};
  };
  auto put_vector = [&](const float*& dst, const float* src, const std::string& name) -> Result<void> {
    auto v = d->vector(src, c.hidden, name.c_str());
    if (!v) return std::unexpected(v.error());
    dst = *v;
    return {};
  };
  if (auto ok = put(d->token_embd, w.token_embd, "token_embd.weight"); !ok) return std::unexpected(ok.error());
  if (auto ok = put(d->output, w.output, "output.weight"); !ok) return std::unexpected(ok.error());
  if (auto ok = put_vector(d->output_norm, w.output_norm, "output_norm.weight"); !ok)
    return std::unexpected(ok.error());
  d->layers.resize(w.layers.size());
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const LlamaLayerWeights& src = w.layers[l];
    CudaLayerWeights& dst = d->layers[l];
    const std::string p = "blk." + std::to_string(l) + ".";
    for (auto [to, from, name] : {std::tuple{&dst.wq, &src.wq, "attn_q"}, std::tuple{&dst.wk, &src.wk, "attn_k"},
                                  std::tuple{&dst.wv, &src.wv, "attn_v"}, std::tuple{&dst.wo, &src.wo, "attn_output"},
                                  std::tuple{&dst.gate, &src.gate, "ffn_gate"}, std::tuple{&dst.up, &src.up, "ffn_up"},
                                  std::tuple{&dst.down, &src.down, "ffn_down"}})
      if (auto ok = put(*to, *from, p + name + ".weight"); !ok) return std::unexpected(ok.error());
    if (auto ok = put_vector(dst.attn_norm, src.attn_norm, p + "attn_norm.weight"); !ok)
      return std::unexpected(ok.error());
    if (auto ok = put_vector(dst.ffn_norm, src.ffn_norm, p + "ffn_norm.weight"); !ok)
      return std::unexpected(ok.error());
  }
  return d;
}

bool CudaWeights::kernels_only(std::int64_t rows) const {
  using kernels::cuda::Matmul;
  if (!Matmul::kernels_only(output, rows)) return false;
  return std::all_of(layers.begin(), layers.end(), [rows](const CudaLayerWeights& l) {
    return Matmul::kernels_only(l.wq, rows) && Matmul::kernels_only(l.wk, rows) && Matmul::kernels_only(l.wv, rows) &&
           Matmul::kernels_only(l.wo, rows) && Matmul::kernels_only(l.gate, rows) &&
           Matmul::kernels_only(l.up, rows) && Matmul::kernels_only(l.down, rows);
  });
}

}  // namespace arbor::model
