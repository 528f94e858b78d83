/* The challenge-response of util/hello.h: nonces and HMAC-SHA256 MACs keyed
 * by the job's secret. */
#include "util/hello.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

int tutti_hello_nonce(unsigned char out[TUTTI_HELLO_NONCE]) {
  size_t got = 0;
  while (got < TUTTI_HELLO_NONCE) {
    const ssize_t n = getrandom(out + got, TUTTI_HELLO_NONCE - got, 0);
    if (n < 0 && errno != EINTR) {
      return -1;
    }
    got += n > 0 ? (size_t)n : 0;
  }
  return 0;
}

void tutti_hello_mac(const unsigned char key[16], enum tutti_hello_dir dir,
                     const struct tutti_hello_transcript* t, unsigned char out[TUTTI_HELLO_MAC]) {
  const unsigned char d = (unsigned char)dir;
  /* The label's NUL is hashed too: no label is a prefix of another's message. */
  const void* parts[5] = {t->label, &d, t->addr, t->hello, t->nonce};
  const size_t lens[5] = {strlen(t->label) + 1, 1, TUTTI_SOCKET_ADDR_WIRE, t->hello_len,
                          TUTTI_HELLO_NONCE};
  tutti_sha256_hmac(key, 16, 5, parts, lens, out);
}

int tutti_hello_check(const unsigned char key[16], enum tutti_hello_dir dir,
                      const struct tutti_hello_transcript* t, const unsigned char* mac) {
  unsigned char want[TUTTI_HELLO_MAC];
  tutti_hello_mac(key, dir, t, want);
  const int bad = tutti_sha256_differ(want, mac, sizeof want);
  tutti_sha256_wipe(want, sizeof want);
  return bad ? -1 : 0;
}
