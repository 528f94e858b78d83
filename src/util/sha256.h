/* SHA-256 and HMAC-SHA256 (FIPS 180-4, RFC 2104), self-contained: RAS
 * proves the job's secret with them whether or not OpenSSL (loaded at run
 * time for ncclSetEncryption only) is present. */
#ifndef TUTTI_UTIL_SHA256_H
#define TUTTI_UTIL_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define TUTTI_SHA256_LEN 32

struct tutti_sha256 {
  uint32_t h[8];
  uint64_t bytes;
  unsigned char block[64];
  size_t used;
};

void tutti_sha256_init(struct tutti_sha256* c);
void tutti_sha256_update(struct tutti_sha256* c, const void* data, size_t len);
void tutti_sha256_final(struct tutti_sha256* c, unsigned char out[TUTTI_SHA256_LEN]);

/* HMAC-SHA256 of the concatenation of `n` parts (part i: data[i], len[i]). */
void tutti_sha256_hmac(const unsigned char* key, size_t key_len, int n, const void* const* data,
                       const size_t* len, unsigned char out[TUTTI_SHA256_LEN]);

/* Compares two MACs in time that does not depend on where they differ: 0
 * when equal. */
int tutti_sha256_differ(const unsigned char* a, const unsigned char* b, size_t len);

/* Zeroes memory the compiler may not skip (keys and their derivatives). */
void tutti_sha256_wipe(void* p, size_t len);

#endif
