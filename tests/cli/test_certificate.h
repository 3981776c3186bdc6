// A self-signed TLS certificate for 127.0.0.1 and localhost, made with
// OpenSSL at test time (no files checked in, nothing expires in the repo).
// The certificate is its own CA: give it to the client as --tls-ca.
//
// Thread-compatible.
//
//   TestCertificate cert = MakeTestCertificate();
//   grpc::SslServerCredentialsOptions options;
//   options.pem_key_cert_pairs.push_back({cert.key_pem, cert.cert_pem});
#ifndef HLAB_TESTS_CLI_TEST_CERTIFICATE_H_
#define HLAB_TESTS_CLI_TEST_CERTIFICATE_H_

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <string>

namespace hlab::cli::testing {

struct TestCertificate {
  std::string cert_pem;
  std::string key_pem;
};

inline std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  std::string text(data, static_cast<size_t>(size));
  BIO_free(bio);
  return text;
}

// Empty strings on failure (the test then fails on them).
inline TestCertificate MakeTestCertificate() {
  TestCertificate out;
  EVP_PKEY* key = EVP_EC_gen("prime256v1");
  X509* cert = X509_new();
  if (key == nullptr || cert == nullptr) return out;
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(
      name, "CN", MBSTRING_ASC,
      reinterpret_cast<const unsigned char*>("hlab test"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  for (const auto& [nid, value] :
       {std::pair<int, const char*>{NID_subject_alt_name,
                                    "IP:127.0.0.1,DNS:localhost"},
        {NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* ext =
        X509V3_EXT_conf_nid(nullptr, &ctx, nid, const_cast<char*>(value));
    if (ext != nullptr) {
      X509_add_ext(cert, ext, -1);
      X509_EXTENSION_free(ext);
    }
  }
  if (X509_sign(cert, key, EVP_sha256()) > 0) {
    BIO* cert_bio = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(cert_bio, cert);
    out.cert_pem = BioText(cert_bio);
    BIO* key_bio = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(key_bio, key, nullptr, nullptr, 0, nullptr,
                             nullptr);
    out.key_pem = BioText(key_bio);
  }
  X509_free(cert);
  EVP_PKEY_free(key);
  return out;
}

}  // namespace hlab::cli::testing

#endif  // HLAB_TESTS_CLI_TEST_CERTIFICATE_H_
