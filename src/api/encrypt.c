/* ncclSetEncryption (NCCL 2.32): a pre-shared key for every TCP connection
 * tutti makes from then on (the bootstrap, the TCP transport, the socket
 * network), checked as NCCL checks it; util/seal.c is the record layer
 * (docs/design.md, "NCCL 2.32"). */
#include <string.h>

#include "api/api.h"
#include "util/check.h"
#include "util/seal.h"

#define PSK_MIN_BYTES 32 /* NCCL's least key */

NCCL_API ncclResult_t ncclSetEncryption(const ncclEncryptionConfig_t* config) {
  ncclEncryptionConfig_t c = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
  if (config != NULL) {
    if (config->magic != NCCL_API_MAGIC) {
      return tutti_error(ncclInvalidArgument,
                         "ncclSetEncryption: the config has magic 0x%x instead of 0x%x: "
                         "initialize it with NCCL_ENCRYPTION_CONFIG_INITIALIZER",
                         config->magic, NCCL_API_MAGIC);
    }
    const size_t n = config->size < sizeof c ? config->size : sizeof c;
    memcpy(&c, config, n);
  }
  if (c.mode == NCCL_ENCRYPTION_MODE_NONE) {
    return tutti_seal_set_key(NULL); /* plaintext from now on */
  }
  if (c.mode != NCCL_ENCRYPTION_MODE_PSK) {
    return tutti_error(ncclInvalidArgument,
                       "ncclSetEncryption: mode %d is neither NCCL_ENCRYPTION_MODE_NONE nor "
                       "NCCL_ENCRYPTION_MODE_PSK",
                       c.mode);
  }
  if (c.psk == NULL || strlen(c.psk) < PSK_MIN_BYTES) {
    return tutti_error(ncclInvalidArgument,
                       "ncclSetEncryption: NCCL_ENCRYPTION_MODE_PSK needs a pre-shared key of at "
                       "least %d bytes (psk is %s)",
                       PSK_MIN_BYTES, c.psk == NULL ? "NULL" : "shorter");
  }
  return tutti_seal_set_key(c.psk);
}
