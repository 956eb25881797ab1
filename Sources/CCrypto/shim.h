#ifndef HG_CCRYPTO_SHIM_H
#define HG_CCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/bio.h>

/* 0 when key_pem is the private key of the certificate in cert_pem; 1: the certificate cannot
   be read; 2: the key cannot be read; 3: they do not go together. */
static inline int hg_check_key_pair(const char *key_pem, const char *cert_pem) {
    BIO *cb = BIO_new_mem_buf(cert_pem, -1);
    X509 *cert = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
    BIO_free(cb);
    if (!cert) return 1;
    BIO *kb = BIO_new_mem_buf(key_pem, -1);
    EVP_PKEY *key = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
    BIO_free(kb);
    if (!key) { X509_free(cert); return 2; }
    int ok = X509_check_private_key(cert, key);
    EVP_PKEY_free(key);
    X509_free(cert);
    return ok == 1 ? 0 : 3;
}

/* HMAC-SHA256 over up to three consecutive parts (prefixes and body), written into out[32].
   EVP_MAC is used because HMAC_CTX is deprecated in OpenSSL 3; OSSL_PARAM arrays are awkward from Swift.
   Returns 1 on success. */
static inline int hg_hmac_sha256(const void *key, size_t keylen,
                                 const void *p1, size_t l1, const void *p2, size_t l2,
                                 const void *p3, size_t l3, unsigned char out[32]) {
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    if (!mac) return 0;
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(mac);
    EVP_MAC_free(mac);
    if (!ctx) return 0;
    OSSL_PARAM params[2] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_end()
    };
    static const unsigned char empty = 0;
    int ok = EVP_MAC_init(ctx, keylen ? key : &empty, keylen, params) == 1;
    if (ok && l1) ok = EVP_MAC_update(ctx, p1, l1) == 1;
    if (ok && l2) ok = EVP_MAC_update(ctx, p2, l2) == 1;
    if (ok && l3) ok = EVP_MAC_update(ctx, p3, l3) == 1;
    size_t outlen = 0;
    if (ok) ok = EVP_MAC_final(ctx, out, &outlen, 32) == 1 && outlen == 32;
    EVP_MAC_CTX_free(ctx);
    return ok;
}

/* SHA-256 of a buffer into out[32]; returns 1 on success. */
static inline int hg_sha256(const void *data, size_t len, unsigned char out[32]) {
    unsigned int n = 0;
    return EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) == 1 && n == 32;
}

static inline int hg_random_bytes(unsigned char *buf, int n) { return RAND_bytes(buf, n); }
static inline int hg_memeq(const void *a, const void *b, size_t n) { return CRYPTO_memcmp(a, b, n) == 0; }
#endif
