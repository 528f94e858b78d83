/* libcrypto.so.3 through dlopen and our own prototypes of the few functions
 * used: no OpenSSL headers at build time, no OpenSSL at run time unless
 * encryption is asked for. */
#include "util/crypto.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/param.h"

#define NID_HKDF 1036         /* EVP_PKEY_HKDF */
#define CTRL_GCM_GET_TAG 0x10 /* EVP_CTRL_GCM_GET_TAG */
#define CTRL_GCM_SET_TAG 0x11 /* EVP_CTRL_GCM_SET_TAG */

static struct {
  void* (*ctx_new)(void);
  void (*ctx_free)(void*);
  const void* (*aes_256_gcm)(void);
  int (*cipher_init)(void*, const void*, void*, const unsigned char*, const unsigned char*, int);
  int (*cipher_update)(void*, unsigned char*, int*, const unsigned char*, int);
  int (*cipher_final)(void*, unsigned char*, int*);
  int (*ctx_ctrl)(void*, int, int, void*);
  void* (*pkey_ctx_new_id)(int, void*);
  void (*pkey_ctx_free)(void*);
  int (*derive_init)(void*);
  int (*set_hkdf_md)(void*, const void*);
  int (*set1_hkdf_salt)(void*, const unsigned char*, int);
  int (*set1_hkdf_key)(void*, const unsigned char*, int);
  int (*add1_hkdf_info)(void*, const unsigned char*, int);
  int (*derive)(void*, unsigned char*, size_t*);
  const void* (*sha256)(void);
  int (*rand_bytes)(unsigned char*, int);
} ossl;

/* Tests only: OpenSSL as if absent, to see ncclSetEncryption's answer. */
static TUTTI_PARAM_INT32(hide_openssl, "TUTTI_TEST_HIDE_OPENSSL", 0, 0, 1,
                         "tests only: 1 makes loading OpenSSL fail as if it were absent");

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_why[256];
static int load_rc = -1;

static void load(void) {
  const int hide = tutti_param_hide_openssl() == 1;
  void* h = hide ? NULL : dlopen("libcrypto.so.3", RTLD_NOW);
  if (h == NULL) {
    snprintf(load_why, sizeof load_why,
             "OpenSSL 3's libcrypto.so.3 could not be loaded (%s): install OpenSSL 3's shared "
             "libraries (libssl3 on Debian and Ubuntu, openssl-libs on Fedora and RHEL)",
             hide ? "hidden by TUTTI_TEST_HIDE_OPENSSL" : dlerror());
    return;
  }
  struct {
    void** slot;
    const char* name;
  } want[] = {
      {(void**)&ossl.ctx_new, "EVP_CIPHER_CTX_new"},
      {(void**)&ossl.ctx_free, "EVP_CIPHER_CTX_free"},
      {(void**)&ossl.aes_256_gcm, "EVP_aes_256_gcm"},
      {(void**)&ossl.cipher_init, "EVP_CipherInit_ex"},
      {(void**)&ossl.cipher_update, "EVP_CipherUpdate"},
      {(void**)&ossl.cipher_final, "EVP_CipherFinal_ex"},
      {(void**)&ossl.ctx_ctrl, "EVP_CIPHER_CTX_ctrl"},
      {(void**)&ossl.pkey_ctx_new_id, "EVP_PKEY_CTX_new_id"},
      {(void**)&ossl.pkey_ctx_free, "EVP_PKEY_CTX_free"},
      {(void**)&ossl.derive_init, "EVP_PKEY_derive_init"},
      {(void**)&ossl.set_hkdf_md, "EVP_PKEY_CTX_set_hkdf_md"},
      {(void**)&ossl.set1_hkdf_salt, "EVP_PKEY_CTX_set1_hkdf_salt"},
      {(void**)&ossl.set1_hkdf_key, "EVP_PKEY_CTX_set1_hkdf_key"},
      {(void**)&ossl.add1_hkdf_info, "EVP_PKEY_CTX_add1_hkdf_info"},
      {(void**)&ossl.derive, "EVP_PKEY_derive"},
      {(void**)&ossl.sha256, "EVP_sha256"},
      {(void**)&ossl.rand_bytes, "RAND_bytes"},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    *want[i].slot = dlsym(h, want[i].name);
    if (*want[i].slot == NULL) {
      snprintf(load_why, sizeof load_why,
               "libcrypto.so.3 has no %s: install OpenSSL 3 (libssl3 on Debian and Ubuntu)",
               want[i].name);
      return; /* the handle stays: closing a library OpenSSL may have started is unsafe */
    }
  }
  load_rc = 0;
}

int tutti_crypto_load(char* why, size_t len) {
  pthread_once(&once, load);
  if (load_rc != 0 && why != NULL) {
    snprintf(why, len, "%s", load_why);
  }
  return load_rc;
}

int tutti_crypto_random(unsigned char* out, size_t len) {
  return ossl.rand_bytes(out, (int)len) == 1 ? 0 : -1;
}

void tutti_crypto_wipe(void* p, size_t n) {
  if (p != NULL && n > 0) {
    explicit_bzero(p, n); /* a memset before free or return is a dead store */
  }
}

int tutti_crypto_hkdf(const unsigned char* key, size_t key_len, const unsigned char* salt,
                      size_t salt_len, const char* info, unsigned char* out, size_t out_len) {
  void* c = ossl.pkey_ctx_new_id(NID_HKDF, NULL);
  size_t n = out_len;
  int ok = c != NULL && ossl.derive_init(c) > 0 && ossl.set_hkdf_md(c, ossl.sha256()) > 0 &&
           ossl.set1_hkdf_salt(c, salt, (int)salt_len) > 0 &&
           ossl.set1_hkdf_key(c, key, (int)key_len) > 0 &&
           ossl.add1_hkdf_info(c, (const unsigned char*)info, (int)strlen(info)) > 0 &&
           ossl.derive(c, out, &n) > 0 && n == out_len;
  if (c != NULL) {
    ossl.pkey_ctx_free(c);
  }
  return ok ? 0 : -1;
}

int tutti_crypto_dir_init(struct tutti_crypto_dir* d, const unsigned char* key_iv, int encrypt) {
  memset(d, 0, sizeof *d);
  d->ctx = ossl.ctx_new();
  if (d->ctx == NULL ||
      ossl.cipher_init(d->ctx, ossl.aes_256_gcm(), NULL, key_iv, NULL, encrypt) != 1) {
    tutti_crypto_dir_free(d);
    return -1;
  }
  memcpy(d->iv, key_iv + TUTTI_CRYPTO_KEY, TUTTI_CRYPTO_IV);
  return 0;
}

void tutti_crypto_dir_free(struct tutti_crypto_dir* d) {
  if (d->ctx != NULL) {
    ossl.ctx_free(d->ctx);
    d->ctx = NULL;
  }
  tutti_crypto_wipe(d->iv, sizeof d->iv);
  d->seq = 0;
}

/* The next record's nonce: base IV xor the counter (as TLS 1.3 does). */
static int next_nonce(struct tutti_crypto_dir* d) {
  unsigned char nonce[TUTTI_CRYPTO_IV];
  memcpy(nonce, d->iv, sizeof nonce);
  for (int i = 0; i < 8; i++) {
    nonce[TUTTI_CRYPTO_IV - 1 - i] ^= (unsigned char)(d->seq >> (8 * i));
  }
  d->seq++;
  const int rc = ossl.cipher_init(d->ctx, NULL, NULL, NULL, nonce, -1) == 1 ? 0 : -1;
  tutti_crypto_wipe(nonce, sizeof nonce); /* made from the derived IV */
  return rc;
}

int tutti_crypto_seal(struct tutti_crypto_dir* d, const unsigned char* aad, size_t aad_len,
                      const struct iovec* iov, int iovcnt, size_t len, unsigned char* out,
                      unsigned char* tag) {
  int n;
  if (next_nonce(d) != 0 || ossl.cipher_update(d->ctx, NULL, &n, aad, (int)aad_len) != 1) {
    return -1;
  }
  size_t done = 0;
  for (int i = 0; i < iovcnt && done < len; i++) {
    size_t take = iov[i].iov_len < len - done ? iov[i].iov_len : len - done;
    if (take > 0 && ossl.cipher_update(d->ctx, out + done, &n, iov[i].iov_base, (int)take) != 1) {
      return -1;
    }
    done += take;
  }
  if (ossl.cipher_final(d->ctx, out + done, &n) != 1) {
    return -1;
  }
  return ossl.ctx_ctrl(d->ctx, CTRL_GCM_GET_TAG, TUTTI_CRYPTO_TAG, tag) == 1 ? 0 : -1;
}

int tutti_crypto_open(struct tutti_crypto_dir* d, const unsigned char* aad, size_t aad_len,
                      const unsigned char* in, size_t len, const unsigned char* tag,
                      unsigned char* out) {
  int n;
  if (next_nonce(d) != 0 || ossl.cipher_update(d->ctx, NULL, &n, aad, (int)aad_len) != 1 ||
      (len > 0 && ossl.cipher_update(d->ctx, out, &n, in, (int)len) != 1) ||
      ossl.ctx_ctrl(d->ctx, CTRL_GCM_SET_TAG, TUTTI_CRYPTO_TAG, (void*)tag) != 1) {
    return -1;
  }
  return ossl.cipher_final(d->ctx, out + len, &n) == 1 ? 0 : -1;
}
