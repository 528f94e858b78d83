/* The proof RAS's processes give each other (ras/internal.h): nonces and
 * MACs keyed by a communicator's secret, which itself never travels. */
#include <string.h>

#include "ras/internal.h"
#include "util/hello.h"
#include "util/sha256.h"

_Static_assert(TUTTI_RAS_NONCE == TUTTI_HELLO_NONCE, "RAS's nonces are the hellos'");

int tutti_ras_nonce(unsigned char out[TUTTI_RAS_NONCE]) {
  return tutti_hello_nonce(out);
}

void tutti_ras_mac(const unsigned char secret[16], const char* label, uint64_t hash,
                   const unsigned char addr[TUTTI_SOCKET_ADDR_WIRE],
                   const unsigned char asker[TUTTI_RAS_NONCE],
                   const unsigned char answerer[TUTTI_RAS_NONCE],
                   unsigned char out[TUTTI_RAS_MAC_LEN]) {
  unsigned char h[8];
  tutti_socket_put64(h, hash);
  /* The label's NUL is hashed too: no label is a prefix of the message. */
  const void* parts[5] = {label, h, addr, asker, answerer};
  const size_t lens[5] = {strlen(label) + 1, sizeof h, TUTTI_SOCKET_ADDR_WIRE, TUTTI_RAS_NONCE,
                          TUTTI_RAS_NONCE};
  tutti_sha256_hmac(secret, 16, 5, parts, lens, out);
}
