/* What every bootstrap connection opens with: the connector's preamble
 * (magic and nonce) and first message's header, checked as bytes arrive;
 * the proof of the job's secret both ends then give (util/hello.h); and the
 * random secrets jobs are given. */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "bootstrap/internal.h"
#include "util/check.h"

static const unsigned char preamble_magic[8] = {'t', 'u', 't', 't', 'i', 'B', 'S', '2'};

ncclResult_t tutti_bs_random_secret(unsigned char secret[TUTTI_BS_SECRET]) {
  size_t got = 0;
  while (got < TUTTI_BS_SECRET) {
    ssize_t n = getrandom(secret + got, TUTTI_BS_SECRET - got, 0);
    if (n < 0 && errno != EINTR) {
      return tutti_error(ncclSystemError, "getrandom failed making the job secret: %s",
                         strerror(errno));
    }
    got += n > 0 ? (size_t)n : 0;
  }
  return ncclSuccess;
}

ncclResult_t tutti_bootstrap_preamble(unsigned char out[TUTTI_BS_PREAMBLE]) {
  memcpy(out, preamble_magic, sizeof preamble_magic);
  if (tutti_hello_nonce(out + sizeof preamble_magic) != 0) {
    return tutti_error(ncclSystemError, "getrandom failed making a bootstrap nonce: %s",
                       strerror(errno));
  }
  return ncclSuccess;
}

int tutti_bootstrap_handshake_check(const unsigned char* buf, size_t got, uint32_t type,
                                    uint32_t len) {
  size_t m = got < sizeof preamble_magic ? got : sizeof preamble_magic;
  if (memcmp(buf, preamble_magic, m) != 0) {
    return -1;
  }
  if (got >= TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER &&
      (tutti_socket_get32(buf + TUTTI_BS_PREAMBLE) != type ||
       tutti_socket_get32(buf + TUTTI_BS_PREAMBLE + 4) != len)) {
    return -1;
  }
  return 0;
}

static struct tutti_hello_transcript transcript(const struct tutti_bs_proof_of* p,
                                                const unsigned char* nonce) {
  return (struct tutti_hello_transcript){p->label, p->addr, p->hello, p->hello_len, nonce};
}

int tutti_bs_prove(const struct tutti_bs_proof_of* p, const unsigned char* keys[2],
                   unsigned char proof[TUTTI_BS_PROOF]) {
  if (tutti_hello_nonce(proof) != 0) {
    return -1;
  }
  const struct tutti_hello_transcript t = transcript(p, proof);
  for (int k = 0; k < 2; k++) {
    tutti_hello_mac(keys[k], TUTTI_HELLO_LISTENER, &t,
                    proof + TUTTI_HELLO_NONCE + (size_t)k * TUTTI_HELLO_MAC);
  }
  return 0;
}

int tutti_bs_answer(const struct tutti_bs_proof_of* p, const unsigned char key[TUTTI_BS_SECRET],
                    const unsigned char proof[TUTTI_BS_PROOF], unsigned char mac[TUTTI_BS_MAC]) {
  const struct tutti_hello_transcript t = transcript(p, proof);
  /* Both slots are checked whatever the first says: time tells nothing. */
  const int a = tutti_hello_check(key, TUTTI_HELLO_LISTENER, &t, proof + TUTTI_HELLO_NONCE);
  const int b =
      tutti_hello_check(key, TUTTI_HELLO_LISTENER, &t, proof + TUTTI_HELLO_NONCE + TUTTI_HELLO_MAC);
  if (a != 0 && b != 0) {
    return -1;
  }
  tutti_hello_mac(key, TUTTI_HELLO_CONNECTOR, &t, mac);
  return 0;
}

int tutti_bs_which_key(const struct tutti_bs_proof_of* p, const unsigned char* keys[2],
                       const unsigned char nonce[TUTTI_HELLO_NONCE],
                       const unsigned char mac[TUTTI_BS_MAC]) {
  const struct tutti_hello_transcript t = transcript(p, nonce);
  const int a = tutti_hello_check(keys[0], TUTTI_HELLO_CONNECTOR, &t, mac);
  const int b = tutti_hello_check(keys[1], TUTTI_HELLO_CONNECTOR, &t, mac);
  return a == 0 ? 0 : b == 0 ? 1 : -1;
}
