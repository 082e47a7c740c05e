#include "runtime/cli/cluster_tls_options.hpp"

namespace arbor::cli {

void declare_cluster_tls(CLI::App& app, cluster::ClusterTls& tls) {
  app.add_option("--cluster-cert", tls.certificate, "this process's certificate (PEM), signed by --cluster-ca")
      ->type_name("FILE");
  app.add_option("--cluster-key", tls.key, "the certificate's private key (PEM, unencrypted)")->type_name("FILE");
  app.add_option("--cluster-ca", tls.ca, "the cluster's CA (PEM): peers must present a certificate it signed")
      ->type_name("FILE");
}

}  // namespace arbor::cli
