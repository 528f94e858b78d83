/* ncclSetEncryption (NCCL 2.32): TLS with a pre-shared key on the library's
 * own TCP sockets. tutti does not encrypt yet: the configuration is checked
 * as NCCL checks it, and a request for encryption is refused with a
 * sentence rather than run in the clear (docs/design.md, "NCCL 2.32"). */
#include <string.h>

#include "api/api.h"
#include "util/check.h"

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
    return ncclSuccess; /* plaintext: what tutti's sockets carry */
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
  return tutti_error(ncclInvalidUsage,
                     "ncclSetEncryption: encryption is not built into this library (tutti %s) "
                     "yet: its bootstrap, TCP transport and socket network would carry the job's "
                     "bytes in the clear, so the request is refused",
                     TUTTI_VERSION_STRING);
}
