// `arbor serve` configuration: where to listen, who may call (API key -> tenant), per
// tenant limits, server limits, and the RuntimeConfig behind it. Read from a JSON file:
//
//   {"host": "127.0.0.1", "port": 8080, "admin_key": "...",
//    "keys": {"KEY": "tenant"},
//    "tenants": {"tenant": {"quota_pages": 0, "read_shared": false,
//                           "max_concurrent": 16, "max_tokens": 512}},
//    "limits": {"max_body_bytes": 1048576, "max_inflight": 64, "max_tokens": 1024,
//               "drain_seconds": 10, "io_threads": 2, "max_runs": 256,
//               "max_run_bytes": 67108864},
//    "workflow_dir": "/srv/arbor/docs",
//    "runtime": {"model_path": "...", "num_threads": 0, "kv_memory_mb": 0, "page_size": 16,
//                "eviction": "lru", "prefix_caching": true, "overlap": true, "prefill_chunk": 256,
//                "max_step_tokens": 1024, "max_queued_requests": 256}}
//
// Unknown keys are errors (a typo must not silently disable a limit).
//
// workflow_dir: workflows posted to POST /v1/runs may read prefix document files only
// when it is set, and then only regular files inside it, reached without '..' or a
// symbolic link, never the config file itself (DocumentAccess::confined_to). Unset
// (the default): they read no file at all.
#pragma once

#include <map>
#include <string>

#include "arbor/runtime.hpp"
#include "common/result.hpp"

namespace arbor::server {

struct TenantLimits {
  int max_concurrent = 0;  // generations + runs in flight at once; 0 = only the global cap
  int max_tokens = 0;      // cap on max_tokens of one request; 0 = the global cap
};

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0 = any free port (tests)
  bool auth = false;               // false: no keys, every request is `default_tenant`
  std::string admin_key;           // sees every tenant's runs, stats, tree, metrics
  std::string default_tenant = "default";
  std::map<std::string, std::string> keys;  // API key -> tenant
  std::map<std::string, TenantLimits> tenant_limits;
  std::size_t max_body_bytes = 1 << 20;
  int max_inflight = 64;           // generations + runs in flight, all tenants
  int max_tokens = 1024;           // cap on a request's max_tokens
  double drain_seconds = 10;       // on stop: wait this long, then cancel what is left
  int io_threads = 2;
  std::size_t max_runs = 256;      // finished runs kept for GET /v1/runs/{id}, at most...
  std::size_t max_run_bytes = 64u << 20;  // ...and at most this many bytes of them (summaries)
  std::string workflow_dir;        // prefix files of HTTP workflows; "" = none (see above)
  std::string config_path;         // the file this config was loaded from ("" = none)
  RuntimeConfig runtime;

  // What an HTTP-submitted workflow may read: nothing, or workflow_dir minus the config.
  DocumentAccess documents() const;
};

// Parses a config document. Errors: invalid_argument naming the field (JSON pointer)
// and, for malformed JSON, the line:column.
Result<ServerConfig> parse_server_config(const std::string& text);
Result<ServerConfig> load_server_config(const std::string& path);

}  // namespace arbor::server
