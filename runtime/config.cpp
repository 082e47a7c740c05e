// The runtime settings' one parser and checker (arbor/config.hpp).
#include "arbor/config.hpp"

#include <utility>

#include "common/enum_names.hpp"

namespace arbor {
namespace {

constexpr EnumNames<DeviceChoice, 3> kDevices = {
    {{"cpu", DeviceChoice::cpu}, {"cuda", DeviceChoice::cuda}, {"auto", DeviceChoice::automatic}}};
constexpr EnumNames<Eviction, 3> kEvictions = {
    {{"lru", Eviction::lru}, {"lfu", Eviction::lfu}, {"workflow", Eviction::workflow}}};
constexpr EnumNames<Precision, 2> kPrecisions = {{{"accurate", Precision::accurate}, {"fast", Precision::fast}}};

template <class Int>
Result<void> check_range(const char* name, Int value, SettingRange range) {
  if (std::cmp_greater_equal(value, range.min) && std::cmp_less_equal(value, range.max)) return {};
  return fail(ErrorCode::invalid_argument, std::string(name) + " must be in " + std::to_string(range.min) + ".." +
                                               std::to_string(range.max) + " (got " + std::to_string(value) + ")");
}

}  // namespace

const char* to_string(DeviceChoice d) { return name_of(kDevices, d); }
const char* to_string(Eviction e) { return name_of(kEvictions, e); }
const char* to_string(Precision p) { return name_of(kPrecisions, p); }

Result<DeviceChoice> parse_device_choice(std::string_view name) { return parse_name(kDevices, name); }
Result<Eviction> parse_eviction(std::string_view name) {
  if (name == "priority") return Eviction::workflow;  // the cache layer's name for it
  return parse_name(kEvictions, name);
}
Result<Precision> parse_precision(std::string_view name) { return parse_name(kPrecisions, name); }
std::vector<std::string> device_names() { return names_of(kDevices); }
std::vector<std::string> eviction_names() { return names_of(kEvictions); }
std::vector<std::string> precision_names() { return names_of(kPrecisions); }

Result<void> check_config(const RuntimeConfig& c) {
  for (auto r : {check_range("page_size", c.page_size, limits::page_size),
                 check_range("num_threads", c.num_threads, limits::num_threads),
                 check_range("kv_memory_mb", c.kv_memory_mb, limits::kv_memory_mb),
                 check_range("prefill_chunk", c.prefill_chunk, limits::prefill_chunk),
                 check_range("max_step_tokens", c.max_step_tokens, limits::max_step_tokens),
                 check_range("max_pinned_pages", c.max_pinned_pages, limits::max_pinned_pages),
                 check_range("tool_pin_ttl_ms", c.tool_pin_ttl_ms, limits::tool_pin_ttl_ms),
                 check_range("max_queued_requests", c.max_queued_requests,
                             limits::max_queued_requests)})
    if (!r) return r;
  for (const auto& [name, t] : c.tenants)
    if (auto r = check_range("quota_pages", t.quota_pages, limits::quota_pages); !r)
      return fail(ErrorCode::invalid_argument, "tenant '" + name + "': " + r.error().message);
  return {};
}

}  // namespace arbor
