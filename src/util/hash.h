/* 64-bit FNV-1a: identities of hosts and communicators, the device
 * layout's shape, tuttirun's key-value table (not for secrecy). C and
 * CUDA C++ alike. */
#ifndef TUTTI_UTIL_HASH_H
#define TUTTI_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t tutti_hash(const void* data, size_t len, uint64_t h) {
  const unsigned char* p = (const unsigned char*)data;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

#define TUTTI_HASH_INIT 0xcbf29ce484222325ULL

#endif
