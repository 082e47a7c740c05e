#include "model/device.hpp"

#if ARBOR_HAS_CUDA
#include "kernels/cuda/device.hpp"
#endif

namespace arbor::model {

const char* device_name(Device device) {
  switch (device) {
    case Device::cpu: return "cpu";
    case Device::cuda: return "cuda";
    case Device::automatic: return "auto";
  }
  return "unknown";
}

bool cuda_built() { return ARBOR_HAS_CUDA != 0; }

int cuda_device_count(std::string* why) {
#if ARBOR_HAS_CUDA
  return kernels::cuda::device_count(why);
#else
  if (why) *why = "this build has no CUDA backend (configure with -DARBOR_CUDA=ON)";
  return 0;
#endif
}

Result<Device> resolve_device(Device requested, std::string* reason) {
  if (requested == Device::cpu) return Device::cpu;
  std::string why;
  const int devices = cuda_device_count(&why);
  if (requested == Device::cuda) {
    if (devices > 0) return Device::cuda;
    return fail(ErrorCode::unsupported, "device 'cuda' was requested, but " + why + "; use device 'cpu' or 'auto'");
  }
  if (devices > 0) {
    if (reason) *reason = "auto: " + std::to_string(devices) + " CUDA device" + (devices > 1 ? "s" : "") + " found";
    return Device::cuda;
  }
  if (reason) *reason = "auto: " + why;
  return Device::cpu;
}

}  // namespace arbor::model
