/* What every bootstrap connection opens with: the preamble (magic and job
 * secret) and the first message's header, checked as bytes arrive; and the
 * random secrets jobs are given. */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "bootstrap/internal.h"
#include "util/check.h"

static const unsigned char preamble_magic[8] = {'t', 'u', 't', 't', 'i', 'B', 'S', '1'};

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

void tutti_bootstrap_preamble(unsigned char out[TUTTI_BS_PREAMBLE],
                              const unsigned char secret[TUTTI_BS_SECRET]) {
  memcpy(out, preamble_magic, sizeof preamble_magic);
  memcpy(out + sizeof preamble_magic, secret, TUTTI_BS_SECRET);
}

int tutti_bootstrap_handshake_check(const unsigned char* buf, size_t got,
                                    const unsigned char secret[TUTTI_BS_SECRET], uint32_t type,
                                    uint32_t len) {
  size_t m = got < sizeof preamble_magic ? got : sizeof preamble_magic;
  if (memcmp(buf, preamble_magic, m) != 0) {
    return -1;
  }
  if (got >= TUTTI_BS_PREAMBLE) {
    /* Constant time, so that timing does not leak how much of a guess was right. */
    unsigned char diff = 0;
    for (int i = 0; i < TUTTI_BS_SECRET; i++) {
      diff |= (unsigned char)(buf[sizeof preamble_magic + i] ^ secret[i]);
    }
    if (diff != 0) {
      return -1;
    }
  }
  if (got >= TUTTI_BS_PREAMBLE + TUTTI_BS_HEADER &&
      (tutti_socket_get32(buf + TUTTI_BS_PREAMBLE) != type ||
       tutti_socket_get32(buf + TUTTI_BS_PREAMBLE + 4) != len)) {
    return -1;
  }
  return 0;
}

int tutti_bootstrap_other_job(const unsigned char* buf, size_t got,
                              const unsigned char secret[TUTTI_BS_SECRET]) {
  return got >= TUTTI_BS_PREAMBLE && memcmp(buf, preamble_magic, sizeof preamble_magic) == 0 &&
         memcmp(buf + sizeof preamble_magic, secret, TUTTI_BS_SECRET) != 0;
}
