#include "runtime/server/server_config.hpp"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/json_text.hpp"

namespace arbor::server {
namespace {

using nlohmann::json;

// Field readers: each fails with the field's JSON pointer and what was expected.
struct Reader {
  std::string error;

  bool check_keys(const json& obj, const std::string& at, const std::set<std::string>& known) {
    if (!obj.is_object()) return fail(at, "must be an object");
    for (const auto& [k, v] : obj.items())
      if (!known.count(k)) return fail(at + "/" + k, "is not a known setting (check the spelling)");
    return true;
  }
  bool fail(const std::string& at, const std::string& what) {
    if (error.empty()) error = "config '" + (at.empty() ? "/" : at) + "' " + what;
    return false;
  }
  template <class Int>
  bool integer(const json& obj, const std::string& at, const char* key, Int& out, long long min, long long max) {
    if (!obj.contains(key)) return true;
    const json& v = obj[key];
    const std::string p = at + "/" + key;
    if (!v.is_number_integer()) return fail(p, "must be an integer");
    const long long n = v.get<long long>();
    if (n < min || n > max)
      return fail(p, "must be between " + std::to_string(min) + " and " + std::to_string(max));
    out = static_cast<Int>(n);
    return true;
  }
  bool number(const json& obj, const std::string& at, const char* key, double& out, double min, double max) {
    if (!obj.contains(key)) return true;
    const json& v = obj[key];
    if (!v.is_number() || v.get<double>() < min || v.get<double>() > max)
      return fail(at + "/" + key, "must be a number between " + std::to_string(min) + " and " + std::to_string(max));
    out = v.get<double>();
    return true;
  }
  bool string(const json& obj, const std::string& at, const char* key, std::string& out) {
    if (!obj.contains(key)) return true;
    if (!obj[key].is_string()) return fail(at + "/" + key, "must be a string");
    out = obj[key].get<std::string>();
    return true;
  }
  template <class Int>
  bool integer(const json& obj, const std::string& at, const char* key, Int& out, SettingRange range) {
    return integer(obj, at, key, out, range.min, range.max);
  }
  // A name parsed into its enum (parse_device_choice, parse_eviction, parse_precision):
  // the parser says what it takes.
  template <class Enum>
  bool name(const json& obj, const std::string& at, const char* key, Enum& out, Result<Enum> (*parse)(std::string_view)) {
    std::string text;
    if (!obj.contains(key)) return true;
    if (!string(obj, at, key, text)) return false;
    auto value = parse(text);
    if (!value) return fail(at + "/" + key, value.error().message);
    out = *value;
    return true;
  }
  bool boolean(const json& obj, const std::string& at, const char* key, bool& out) {
    if (!obj.contains(key)) return true;
    if (!obj[key].is_boolean()) return fail(at + "/" + key, "must be true or false");
    out = obj[key].get<bool>();
    return true;
  }
};

bool read_runtime(Reader& r, const json& j, RuntimeConfig& rc) {
  const std::string at = "/runtime";
  return r.check_keys(j, at, {"model_path", "device", "num_threads", "kv_memory_mb", "page_size", "eviction",
                              "prefix_caching", "overlap", "precision", "prefill_chunk", "max_step_tokens", "max_pinned_pages",
                              "max_queued_requests", "tool_pin_ttl_ms"}) &&
         r.string(j, at, "model_path", rc.model_path) && r.name(j, at, "device", rc.device, parse_device_choice) &&
         r.integer(j, at, "num_threads", rc.num_threads, limits::num_threads) &&
         r.integer(j, at, "kv_memory_mb", rc.kv_memory_mb, limits::kv_memory_mb) &&
         r.integer(j, at, "page_size", rc.page_size, limits::page_size) &&
         r.name(j, at, "eviction", rc.eviction, parse_eviction) &&
         r.boolean(j, at, "prefix_caching", rc.prefix_caching) && r.boolean(j, at, "overlap", rc.overlap) &&
         r.name(j, at, "precision", rc.precision, parse_precision) &&
         r.integer(j, at, "prefill_chunk", rc.prefill_chunk, limits::prefill_chunk) &&
         r.integer(j, at, "max_step_tokens", rc.max_step_tokens, limits::max_step_tokens) &&
         r.integer(j, at, "max_pinned_pages", rc.max_pinned_pages, limits::max_pinned_pages) &&
         r.integer(j, at, "max_queued_requests", rc.max_queued_requests, limits::max_queued_requests) &&
         r.integer(j, at, "tool_pin_ttl_ms", rc.tool_pin_ttl_ms, limits::tool_pin_ttl_ms);
}

bool read_tenants(Reader& r, const json& j, ServerConfig& c) {
  if (!j.is_object()) return r.fail("/tenants", "must be an object of tenant name -> settings");
  for (const auto& [name, t] : j.items()) {
    const std::string at = "/tenants/" + name;
    if (name.empty()) return r.fail(at, "tenant names must not be empty");
    TenantOptions options;
    TenantLimits limits;
    if (!r.check_keys(t, at, {"quota_pages", "read_shared", "max_concurrent", "max_tokens"}) ||
        !r.integer(t, at, "quota_pages", options.quota_pages, limits::quota_pages) ||
        !r.boolean(t, at, "read_shared", options.read_shared) ||
        !r.integer(t, at, "max_concurrent", limits.max_concurrent, 0, 1 << 20) ||
        !r.integer(t, at, "max_tokens", limits.max_tokens, 0, 1 << 20))
      return false;
    c.runtime.tenants[name] = options;
    c.tenant_limits[name] = limits;
  }
  return true;
}

bool read_keys(Reader& r, const json& j, ServerConfig& c) {
  if (!j.is_object()) return r.fail("/keys", "must be an object of API key -> tenant name");
  for (const auto& [key, tenant] : j.items()) {
    // The key itself is a secret: never echo it in an error.
    if (key.size() < 8) return r.fail("/keys", "has a key shorter than 8 characters; use long random keys");
    if (!tenant.is_string() || tenant.get<std::string>().empty())
      return r.fail("/keys", "maps a key to something other than a tenant name (a non-empty string)");
    c.keys[key] = tenant.get<std::string>();
  }
  return true;
}

}  // namespace

Result<ServerConfig> parse_server_config(const std::string& text) {
  auto doc = parse_json_text(text);
  if (!doc) return fail(ErrorCode::invalid_argument, "invalid JSON at " + doc.error().describe());
  const json& j = *doc;
  ServerConfig c;
  Reader r;
  json limits = j.contains("limits") ? j["limits"] : json::object();
  bool ok = r.check_keys(j, "", {"host", "port", "admin_key", "keys", "tenants", "limits", "runtime",
                                 "workflow_dir", "default_tenant"}) &&
            r.string(j, "", "host", c.host) && r.integer(j, "", "port", c.port, 0, 65535) &&
            r.string(j, "", "admin_key", c.admin_key) && r.string(j, "", "workflow_dir", c.workflow_dir) &&
            r.string(j, "", "default_tenant", c.default_tenant) &&
            r.check_keys(limits, "/limits",
                         {"max_body_bytes", "max_inflight", "max_tokens", "drain_seconds", "io_threads", "max_runs",
                          "max_run_bytes"}) &&
            r.integer(limits, "/limits", "max_body_bytes", c.max_body_bytes, 64, 1LL << 30) &&
            r.integer(limits, "/limits", "max_inflight", c.max_inflight, 1, 1 << 16) &&
            r.integer(limits, "/limits", "max_tokens", c.max_tokens, 1, 1 << 20) &&
            r.number(limits, "/limits", "drain_seconds", c.drain_seconds, 0, 3600) &&
            r.integer(limits, "/limits", "io_threads", c.io_threads, 1, 256) &&
            r.integer(limits, "/limits", "max_runs", c.max_runs, 1, 1 << 20) &&
            r.integer(limits, "/limits", "max_run_bytes", c.max_run_bytes, 1 << 16, 1LL << 40) &&
            (!j.contains("tenants") || read_tenants(r, j["tenants"], c)) &&
            (!j.contains("keys") || read_keys(r, j["keys"], c)) &&
            (!j.contains("runtime") || read_runtime(r, j["runtime"], c.runtime));
  if (!ok) return fail(ErrorCode::invalid_argument, r.error);
  if (!c.admin_key.empty() && c.admin_key.size() < 8)
    return fail(ErrorCode::invalid_argument, "config '/admin_key' is shorter than 8 characters; use a long random key");
  if (c.keys.count(c.admin_key))
    return fail(ErrorCode::invalid_argument, "config '/admin_key' is also listed under /keys; use distinct keys");
  c.auth = !c.keys.empty() || !c.admin_key.empty();
  return c;
}

Result<ServerConfig> load_server_config(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return fail(ErrorCode::not_found, "config file '" + path + "' cannot be opened; check the path");
  std::stringstream ss;
  ss << f.rdbuf();
  auto config = parse_server_config(ss.str());
  if (!config) return fail(config.error().code, path + ": " + config.error().message);
  std::error_code ec;
  config->config_path = std::filesystem::absolute(path, ec).string();  // never readable by a workflow
  if (ec) config->config_path = path;
  return config;
}

DocumentAccess ServerConfig::documents() const {
  if (workflow_dir.empty()) return DocumentAccess::no_files();
  std::vector<std::string> deny;
  if (!config_path.empty()) deny.push_back(config_path);
  return DocumentAccess::confined_to(workflow_dir, std::move(deny));
}

}  // namespace arbor::server
