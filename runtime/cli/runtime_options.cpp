#include "runtime/cli/runtime_options.hpp"

#include <cctype>
#include <cstdio>

#include "runtime/cli/default_model.hpp"
#include "runtime/cli/options.hpp"

namespace arbor::cli {

void RuntimeOptions::declare(CLI::App& app, unsigned flags) {
  auto add = [&](RuntimeFlag flag, CLI::Option* option) { options_[flag] = option; };
  if (flags & kModelFlag)
    add(kModelFlag, app.add_option("--model", values_.model_path,
                                   "GGUF model file (default: models/SmolLM2-135M-Instruct.Q4_1.gguf of the checkout)")
                        ->type_name("PATH"));
  if (flags & kDeviceFlag)
    add(kDeviceFlag, app.add_option("--device", device_,
                                    "where the forward pass runs: cpu, cuda (needs a CUDA build and device), or auto "
                                    "(cuda when both are there, else cpu)")
                         ->type_name("DEVICE")
                         ->check(one_of(device_names()))
                         ->capture_default_str());
  if (flags & kThreadsFlag)
    add(kThreadsFlag, app.add_option("--threads", values_.num_threads, "CPU engine threads (0 = all cores)")
                          ->type_name("N")
                          ->check(integer_in(limits::num_threads))
                          ->capture_default_str());
  if (flags & kKvMemFlag)
    add(kKvMemFlag, app.add_option("--kv-mem", values_.kv_memory_mb,
                                   "KV page pool size in MiB, raised when a request does not fit; 0 = automatic: "
                                   "256 on the CPU, on a GPU 90% of the memory left after the weights")
                        ->type_name("MB")
                        ->check(integer_in(limits::kv_memory_mb))
                        ->capture_default_str());
  if (flags & kPageSizeFlag)
    add(kPageSizeFlag, app.add_option("--page-size", values_.page_size, "tokens per KV page")
                           ->type_name("N")
                           ->check(integer_in(limits::page_size))
                           ->capture_default_str());
  if (flags & kEvictionFlag)
    add(kEvictionFlag, app.add_option("--eviction", eviction_,
                                      "eviction policy: least recently used, least frequently used, or workflow "
                                      "(keeps the prefixes pending agents will read)")
                           ->type_name("POLICY")
                           ->check(one_of(eviction_names()))
                           ->capture_default_str());
  if (flags & kToolPinTtlFlag)
    add(kToolPinTtlFlag, app.add_option("--tool-pin-ttl", values_.tool_pin_ttl_ms,
                                        "while an agent's tool runs, keep its cached history pinned this many ms "
                                        "(eviction skips it); 0 = off")
                             ->type_name("MS")
                             ->check(integer_in(limits::tool_pin_ttl_ms))
                             ->capture_default_str());
  if (flags & kNoCacheFlag)
    add(kNoCacheFlag, app.add_flag("--no-cache", no_cache_,
                                   "no prefix reuse: compute every prompt in full (the baseline)"));
  if (flags & kNoOverlapFlag)
    add(kNoOverlapFlag, app.add_flag("--no-overlap", no_overlap_,
                                     "on a GPU, each step waits for the one before instead of being queued behind it "
                                     "(to measure the overlap)"));
  if (flags & kPrecisionFlag)
    add(kPrecisionFlag, app.add_option("--precision", precision_,
                                       "activations of the int8 matmuls: accurate (two 8-bit terms) or fast (one "
                                       "term, llama.cpp's scheme, ~2x faster prefill, ~0.2 logits of drift)")
                            ->type_name("MODE")
                            ->check(one_of(precision_names()))
                            ->capture_default_str());
}

bool RuntimeOptions::given(RuntimeFlag flag) const {
  auto it = options_.find(flag);
  return it != options_.end() && it->second->count() > 0;
}

void RuntimeOptions::apply(RuntimeConfig& config) const {
  if (given(kModelFlag)) config.model_path = values_.model_path;
  if (config.model_path.empty()) config.model_path = default_model_path();
  if (given(kDeviceFlag)) config.device = *parse_device_choice(device_);  // one_of checked the name
  if (given(kThreadsFlag)) config.num_threads = values_.num_threads;
  if (given(kKvMemFlag)) config.kv_memory_mb = values_.kv_memory_mb;
  if (given(kPageSizeFlag)) config.page_size = values_.page_size;
  if (given(kEvictionFlag)) config.eviction = *parse_eviction(eviction_);  // one_of checked the name
  if (given(kNoCacheFlag) && no_cache_) config.prefix_caching = false;
  if (given(kNoOverlapFlag) && no_overlap_) config.overlap = false;
  if (given(kToolPinTtlFlag)) config.tool_pin_ttl_ms = values_.tool_pin_ttl_ms;
  if (given(kPrecisionFlag)) config.precision = *parse_precision(precision_);
}

void print_device_line(const std::string& command, const Runtime& runtime) {
  std::fprintf(stderr, "arbor %s: device %s\n", command.c_str(), runtime.device_info().c_str());
}

std::string cli_wording(std::string message, const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> names = {
      {"kv_memory_mb", "--kv-mem"}, {"page_size", "--page-size"}, {"num_threads", "--threads"},
      {"model_path", "--model"}, {"tool_pin_ttl_ms", "--tool-pin-ttl"}};
  names.insert(extra.begin(), extra.end());
  auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  for (std::size_t i = 0; i < message.size();) {
    std::size_t j = i;
    while (j < message.size() && is_word(message[j])) ++j;
    if (j == i) {
      out += message[i++];
      continue;
    }
    const std::string word = message.substr(i, j - i);
    auto it = names.find(word);
    out += it == names.end() ? word : it->second;
    i = j;
  }
  return out;
}

}  // namespace arbor::cli
