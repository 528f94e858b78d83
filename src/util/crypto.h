/* OpenSSL 3's libcrypto, loaded at run time: the AEAD cipher, HKDF and the
 * random source the record layer (util/seal.c) is built from. tutti links
 * nothing of OpenSSL, so it loads and runs where OpenSSL is absent; only
 * encryption then refuses, with the reason. */
#ifndef TUTTI_UTIL_CRYPTO_H
#define TUTTI_UTIL_CRYPTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define TUTTI_CRYPTO_KEY 32 /* AES-256 */
#define TUTTI_CRYPTO_IV 12  /* GCM nonce */
#define TUTTI_CRYPTO_TAG 16

/* Loads libcrypto.so.3 once; 0, or -1 with a sentence in `why` saying what
 * is missing and what to install. TUTTI_TEST_HIDE_OPENSSL=1 (read by tests
 * only) makes it fail as if the library were absent. */
int tutti_crypto_load(char* why, size_t len);

int tutti_crypto_random(unsigned char* out, size_t len);
/* Clears n bytes at p in a way the optimiser may not drop (explicit_bzero):
 * for keys, what they are derived from, and plaintext scratch. */
void tutti_crypto_wipe(void* p, size_t n);
/* HKDF-SHA256 (RFC 5869); 0 on success. */
int tutti_crypto_hkdf(const unsigned char* key, size_t key_len, const unsigned char* salt,
                      size_t salt_len, const char* info, unsigned char* out, size_t out_len);

/* One direction of a connection: AES-256-GCM under one key, the nonce being
 * the direction's base IV xor a 64-bit record counter. */
struct tutti_crypto_dir {
  void* ctx; /* EVP_CIPHER_CTX */
  unsigned char iv[TUTTI_CRYPTO_IV];
  uint64_t seq;
};

int tutti_crypto_dir_init(struct tutti_crypto_dir* d, const unsigned char* key_iv, int encrypt);
/* Frees the cipher (OpenSSL clears its key schedule) and wipes the IV. */
void tutti_crypto_dir_free(struct tutti_crypto_dir* d);
/* Encrypts the gathered plaintext (`len` bytes from iov) into out and the
 * tag into tag, authenticating aad; 0 on success. Advances the counter. */
int tutti_crypto_seal(struct tutti_crypto_dir* d, const unsigned char* aad, size_t aad_len,
                      const struct iovec* iov, int iovcnt, size_t len, unsigned char* out,
                      unsigned char* tag);
/* Decrypts len bytes of in into out (may be equal) and checks the tag; 0
 * when authentic, -1 otherwise. GCM writes the plaintext before the tag is
 * checked, so after a -1 out holds unauthenticated bytes: out must be a
 * buffer nobody reads before this returns 0 (util/seal.c opens records in
 * its own scratch). Advances the counter either way: a record that failed
 * ends the connection. */
int tutti_crypto_open(struct tutti_crypto_dir* d, const unsigned char* aad, size_t aad_len,
                      const unsigned char* in, size_t len, const unsigned char* tag,
                      unsigned char* out);

#endif
