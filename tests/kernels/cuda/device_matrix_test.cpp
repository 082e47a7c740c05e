// The device layout of a quantized matrix, read back byte by byte: GGUF's blocks split
// into a quants plane and a scales plane (kernels/cuda/device_matrix.hpp), staged in
// chunks that do not divide the block count.
#include "kernels/cuda/device_matrix.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "cuda_test_util.hpp"
#include "kernels/kernel_test_util.hpp"

namespace arbor::kernels::cuda {
namespace {

TEST(CudaDeviceMatrix, UploadSplitsEachBlockIntoItsQuantsAndItsScales) {
  ARBOR_REQUIRE_CUDA();
  std::mt19937 rng(3);
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0}) {
    // 8 MiB of staging holds ~420k-466k blocks: 1,100 rows of 480 blocks need two passes.
    const std::int64_t rows = 1100, cols = 32 * 480, blocks = rows * (cols / 32);
    const auto bytes = kernels::testing::random_weights(rng, type, rows, cols);
    DeviceBuffer buffer;
    testing::upload(type, bytes, rows, cols, buffer);
    const auto image = testing::to_host<std::uint8_t>(buffer, bytes.size());
    const BlockPlanes planes = block_planes(type);
    const std::int64_t block_bytes = planes.scale_bytes + planes.quant_bytes;
    ASSERT_EQ(std::int64_t(bytes.size()), blocks * block_bytes);
    const std::uint8_t* scale_plane = image.data() + blocks * planes.quant_bytes;
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::uint8_t* block = bytes.data() + b * block_bytes;
      ASSERT_EQ(std::memcmp(scale_plane + b * planes.scale_bytes, block, std::size_t(planes.scale_bytes)), 0)
          << type_name(type) << " scales of block " << b;
      ASSERT_EQ(std::memcmp(image.data() + b * planes.quant_bytes, block + planes.scale_bytes,
                            std::size_t(planes.quant_bytes)), 0)
          << type_name(type) << " quants of block " << b;
    }
  }
}

TEST(CudaDeviceMatrix, F32IsCopiedAsStored) {
  ARBOR_REQUIRE_CUDA();
  std::mt19937 rng(4);
  const auto bytes = kernels::testing::random_weights(rng, GgmlType::F32, 5, 7);
  DeviceBuffer buffer;
  testing::upload(GgmlType::F32, bytes, 5, 7, buffer);
  EXPECT_EQ(testing::to_host<std::uint8_t>(buffer, bytes.size()), bytes);
}

}  // namespace
}  // namespace arbor::kernels::cuda
