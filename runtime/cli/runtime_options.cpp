#include "runtime/cli/runtime_options.hpp"

#include "runtime/cli/default_model.hpp"

namespace arbor::cli {

const std::vector<std::string>& runtime_option_names() {
  static const std::vector<std::string> names = {"model", "threads", "kv-mem", "page-size", "eviction", "no-cache", "precision"};
  return names;
}

bool runtime_config_from(const Args& args, RuntimeConfig& config, std::string* error) {
  config.model_path = args.get("model", config.model_path.empty() ? default_model_path() : config.model_path);
  config.num_threads = int(args.get_int("threads", config.num_threads, error));
  config.kv_memory_mb = std::size_t(args.get_int("kv-mem", long(config.kv_memory_mb), error));
  config.page_size = int(args.get_int("page-size", config.page_size, error));
  config.eviction = args.get("eviction", config.eviction);
  if (args.has("no-cache")) config.prefix_caching = false;
  config.precision = args.get("precision", config.precision);
  if (!error->empty()) return false;
  if (config.num_threads < 0) *error = "--threads must be >= 0 (0 = all cores)";
  else if (config.kv_memory_mb < 1) *error = "--kv-mem must be at least 1 (MB)";
  else if (config.page_size < 1 || config.page_size > 1024) *error = "--page-size must be in 1..1024";
  else if (config.eviction != "lru" && config.eviction != "lfu" && config.eviction != "workflow")
    *error = "--eviction must be lru, lfu or workflow, got '" + config.eviction + "'";
  else if (config.precision != "accurate" && config.precision != "fast")
    *error = "--precision must be accurate or fast, got '" + config.precision + "'";
  return error->empty();
}

}  // namespace arbor::cli
