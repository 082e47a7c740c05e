// Which backend computes the forward pass: the CPU kernels or the CUDA kernels
// (built only with -DARBOR_CUDA=ON), and how `automatic` picks one.
#pragma once

#include <string>

#include "common/result.hpp"

namespace arbor::model {

enum class Device { cpu, cuda, automatic };

// "cpu", "cuda", "auto". (Names are parsed once, above this layer: arbor/config.hpp's
// parse_device_choice.)
const char* device_name(Device device);

// True when this build has the CUDA backend (-DARBOR_CUDA=ON).
bool cuda_built();
// CUDA devices the driver reports; 0 in a build without CUDA, with no driver or no
// device (`why`, when given, then says which).
int cuda_device_count(std::string* why = nullptr);

// The device an engine runs on for a request: cpu and cuda stand for themselves
// (unsupported when cuda is asked of a build without CUDA or a machine without a
// device, saying which and to use cpu); automatic is cuda when the build has CUDA and
// a device is present, else cpu. `reason`, when given, says why automatic chose.
Result<Device> resolve_device(Device requested, std::string* reason = nullptr);

}  // namespace arbor::model
