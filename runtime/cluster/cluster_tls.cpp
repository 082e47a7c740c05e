#include "runtime/cluster/cluster_tls.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <cstdio>
#include <memory>

namespace arbor::cluster {
namespace {

// OpenSSL's last error as text ("" when it queued none), clearing its queue.
std::string openssl_error() {
  std::string text;
  for (unsigned long e; (e = ERR_get_error()) != 0;) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    text = buf;  // the last is the most specific
  }
  return text;
}

Result<void> bad(const char* flag, const std::string& file, const std::string& what) {
  const std::string why = openssl_error();
  return fail(ErrorCode::invalid_argument,
              std::string(flag) + " " + file + ": " + what + (why.empty() ? "" : " (" + why + ")"));
}

bool readable(const std::string& file) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(file.c_str(), "rb"), std::fclose);
  return f != nullptr;
}

}  // namespace

Result<void> check_cluster_tls(const ClusterTls& tls) {
  if (!tls.enabled()) return {};
  if (tls.certificate.empty() || tls.key.empty() || tls.ca.empty())
    return fail(ErrorCode::invalid_argument,
                "--cluster-cert, --cluster-key and --cluster-ca go together: give all three (this process's "
                "certificate, its key, the cluster's CA) or none");
  for (const auto& [flag, file] : {std::pair{"--cluster-cert", &tls.certificate}, std::pair{"--cluster-key", &tls.key},
                                   std::pair{"--cluster-ca", &tls.ca}})
    if (!readable(*file)) return fail(ErrorCode::invalid_argument, std::string(flag) + " " + *file + ": cannot read it");

  ERR_clear_error();
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx(SSL_CTX_new(TLS_method()), SSL_CTX_free);
  if (!ctx) return fail(ErrorCode::failed, "OpenSSL cannot make a TLS context: " + openssl_error());
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), tls.certificate.c_str()) != 1)
    return bad("--cluster-cert", tls.certificate, "not a PEM certificate");
  std::unique_ptr<BIO, int (*)(BIO*)> key_file(BIO_new_file(tls.key.c_str(), "rb"), BIO_free);
  std::unique_ptr<EVP_PKEY, void (*)(EVP_PKEY*)> key(
      key_file ? PEM_read_bio_PrivateKey(key_file.get(), nullptr, nullptr, nullptr) : nullptr, EVP_PKEY_free);
  if (!key) return bad("--cluster-key", tls.key, "not an unencrypted PEM private key");
  if (SSL_CTX_use_PrivateKey(ctx.get(), key.get()) != 1 || SSL_CTX_check_private_key(ctx.get()) != 1)
    return bad("--cluster-key", tls.key, "is not the key of the certificate " + tls.certificate);
  if (SSL_CTX_load_verify_locations(ctx.get(), tls.ca.c_str(), nullptr) != 1)
    return bad("--cluster-ca", tls.ca, "not a PEM CA certificate");

  // The peers verify this certificate against the same CA: do it here first.
  STACK_OF(X509)* chain = nullptr;  // the certificate file's intermediates, if any
  SSL_CTX_get0_chain_certs(ctx.get(), &chain);
  std::unique_ptr<X509_STORE_CTX, void (*)(X509_STORE_CTX*)> verify(X509_STORE_CTX_new(), X509_STORE_CTX_free);
  if (!verify || X509_STORE_CTX_init(verify.get(), SSL_CTX_get_cert_store(ctx.get()), SSL_CTX_get0_certificate(ctx.get()),
                                     chain) != 1)
    return fail(ErrorCode::failed, "OpenSSL cannot verify a certificate: " + openssl_error());
  if (X509_verify_cert(verify.get()) != 1)
    return fail(ErrorCode::invalid_argument,
                "--cluster-cert " + tls.certificate + " does not verify against --cluster-ca " + tls.ca + " (" +
                    X509_verify_cert_error_string(X509_STORE_CTX_get_error(verify.get())) +
                    "): every peer would refuse it; use a certificate that CA signed");
  return {};
}

}  // namespace arbor::cluster
