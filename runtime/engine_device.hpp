// Where the public device setting (arbor/config.hpp: DeviceChoice, parsed once by
// parse_device_choice) meets the model layer's device (model/device.hpp), for every
// place that makes an engine: Runtime::create and the CLI's perplexity and bench engine.
#pragma once

#include "arbor/config.hpp"
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

}  // namespace arbor
