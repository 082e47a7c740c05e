// The cluster's mutual TLS: `arbor node` and the `arbor serve --nodes` router speak
// CAF's protocol inside TLS (CAF's OpenSSL module, caf::openssl) when each is given a
// certificate, its private key and the cluster's CA (--cluster-cert, --cluster-key,
// --cluster-ca). Both sides then require the peer's certificate to verify against that
// CA: a process without a certificate the cluster's CA signed cannot connect to a node
// (nor pose as one to a router), and the traffic (prompts, outputs, KV events) is
// encrypted. Any certificate the CA signed is accepted (no host name check): the CA is
// the cluster's membership list, so give it a CA of its own.
// Without them the protocol is plain TCP, and a node listens on loopback only.
#pragma once

#include <string>

#include "common/result.hpp"

namespace arbor::cluster {

struct ClusterTls {
  std::string certificate;  // PEM: this process's certificate (chain)
  std::string key;          // PEM: its private key (unencrypted)
  std::string ca;           // PEM: the cluster's CA certificate(s)
  bool enabled() const { return !certificate.empty() || !key.empty() || !ca.empty(); }
};

// All three or none; each file readable PEM; the key matches the certificate; the
// certificate verifies against the CA (else every peer would refuse it). Errors
// (invalid_argument) name the flag, the file and what to fix. Checked before any
// connection: CAF reads them only at the first handshake, where a bad file could
// not be reported.
Result<void> check_cluster_tls(const ClusterTls& tls);

}  // namespace arbor::cluster
