// Builds the engine for a device: the one place that names every backend, so the
// layers above (actors/, runtime/) receive an Engine and never choose kernels.
#pragma once

#include <memory>

#include "common/result.hpp"
#include "kernels/weight_matrix.hpp"
#include "model/device.hpp"
#include "model/engine.hpp"
#include "model/llama_weights.hpp"

namespace arbor::model {

class Model;

struct EngineOptions {
  Device device = Device::automatic;  // resolve_device() says what automatic picks
  int num_threads = 0;                // CPU engine threads; 0 = all hardware threads
  // How int8 matmuls round activations: the CPU's (two int8 terms, or one when fast);
  // the CUDA GEMV's (f32, or int8 when fast).
  kernels::MatmulPrecision precision = kernels::MatmulPrecision::accurate;
};

// The engine for `options.device`. unsupported (with what to do) when cuda is asked of
// a build or machine without it; the CUDA engine's own errors (device memory for the
// weights) as it reports them. `config` and `weights` (or `model`) must outlive it.
Result<std::unique_ptr<Engine>> make_engine(const LlamaConfig& config, const LlamaWeights& weights,
                                            const EngineOptions& options);
Result<std::unique_ptr<Engine>> make_engine(const Model& model, const EngineOptions& options);

}  // namespace arbor::model
