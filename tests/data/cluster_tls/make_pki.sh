#!/usr/bin/env bash
# Makes the test PKI of the cluster's mutual TLS tests (tests/cluster/cluster_tls_test.cpp):
#   cluster-ca.pem        the cluster's CA
#   member.pem/.key       a certificate it signed (nodes and routers of the cluster)
#   rogue.pem/.key        a certificate another CA (other-ca.pem) signed: must be refused
# EC P-256 keys, valid 100 years; the CA keys are not kept. Test material only: never
# use these files for a real cluster. Re-run to make a new set (OpenSSL 3).
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ca() {  # name, common name
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$tmp/$1.key" -out "$1.pem" \
    -days 36500 -subj "/CN=$2" 2>/dev/null
}
leaf() {  # ca name, leaf name
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$2.key" -out "$tmp/$2.csr" \
    -subj "/CN=arbor test $2" 2>/dev/null
  openssl x509 -req -in "$tmp/$2.csr" -CA "$1.pem" -CAkey "$tmp/$1.key" -CAcreateserial -CAserial "$tmp/$1.srl" \
    -out "$2.pem" -days 36500 2>/dev/null
}
ca cluster-ca "Arbor test cluster CA"
ca other-ca "Another test CA"
leaf cluster-ca member
leaf other-ca rogue
