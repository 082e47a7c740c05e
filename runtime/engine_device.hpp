// Where the public engine settings (arbor/config.hpp: DeviceChoice and Precision, parsed
// once by parse_device_choice and parse_precision) meet the model layer's
// (model/device.hpp, kernels/weight_matrix.hpp), for every place that makes an engine:
// Runtime::create and the CLI's perplexity and bench engine.
#pragma once

#include "arbor/config.hpp"
#include "kernels/weight_matrix.hpp"
#include "model/device.hpp"

namespace arbor {

inline model::Device engine_device(DeviceChoice device) {
  switch (device) {
    case DeviceChoice::cpu: return model::Device::cpu;
    case DeviceChoice::cuda: return model::Device::cuda;
    case DeviceChoice::automatic: return model::Device::automatic;
  }
  return model::Device::automatic;
}

inline kernels::MatmulPrecision engine_precision(Precision precision) {
  return precision == Precision::fast ? kernels::MatmulPrecision::fast : kernels::MatmulPrecision::accurate;
}

}  // namespace arbor
