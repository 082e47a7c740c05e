#include "model/engine_factory.hpp"

#include "model/cpu_engine.hpp"
#include "model/model.hpp"
#if ARBOR_HAS_CUDA
#include "model/cuda/cuda_engine.hpp"
#endif

namespace arbor::model {

Result<std::unique_ptr<Engine>> make_engine(const LlamaConfig& config, const LlamaWeights& weights,
                                            const EngineOptions& options) {
  auto device = resolve_device(options.device);
  if (!device) return std::unexpected(device.error());
#if ARBOR_HAS_CUDA
  if (*device == Device::cuda) return make_cuda_engine(config, weights, options.precision);
#endif
  return std::make_unique<CpuEngine>(config, weights, options.num_threads, options.precision);
}

Result<std::unique_ptr<Engine>> make_engine(const Model& model, const EngineOptions& options) {
  return make_engine(model.config(), model.weights(), options);
}

}  // namespace arbor::model
