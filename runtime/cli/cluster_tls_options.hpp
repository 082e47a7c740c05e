// --cluster-cert, --cluster-key, --cluster-ca: the cluster's mutual TLS
// (runtime/cluster/cluster_tls.hpp), the same three flags on `arbor node` and on
// `arbor serve --nodes`.
#pragma once

#include <CLI/CLI.hpp>

#include "runtime/cluster/cluster_tls.hpp"

namespace arbor::cli {

void declare_cluster_tls(CLI::App& app, cluster::ClusterTls& tls);

}  // namespace arbor::cli
