/* The record layer of ncclSetEncryption (util/seal.c) on socket pairs, a
 * relay in the middle that can alter, keep or replay bytes: round trips,
 * a flipped byte, a replayed record, a wrong key, a plaintext peer, and
 * ncclSetEncryption's answer when OpenSSL cannot be loaded. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "nccl.h"
#include "seal_link.h"
#include "util/seal.h"

#define KEY "0123456789abcdef0123456789abcdef-unit-key"
#define KEY2 "0123456789abcdef0123456789abcdef-unit-KEY"

static size_t relay(int from, int to, long flip, unsigned char* keep, size_t* kept) {
  struct tape t = {0};
  size_t m = relay_rec(from, to, flip, keep != NULL ? &t : NULL);
  if (keep != NULL) {
    memcpy(keep + *kept, t.bytes, t.len);
    *kept += t.len;
    free(t.bytes);
  }
  return m;
}

static void round_trip(void) {
  struct link l;
  int ra, rb;
  open_link(&l, KEY, KEY);
  shake(&l, &ra, &rb);
  CHECK(ra == 0 && rb == 0, "handshake: %d %d", ra, rb);
  const size_t len = 3u << 20;
  unsigned char* src = malloc(len);
  unsigned char* dst = calloc(1, len);
  for (size_t i = 0; i < len; i++) {
    src[i] = (unsigned char)(i * 131 + (i >> 9));
  }
  /* A sender on its own runs ahead of the reader by what the relay holds:
   * send and receive in turns, reads of odd sizes (part of a record). */
  size_t sent = 0, got = 0;
  const size_t reads[] = {1, 7, 4096, 100000, 1u << 20};
  int k = 0;
  while (got < len) {
    if (sent < len) {
      ssize_t n = tutti_seal_send(l.a, src + sent, len - sent);
      if (n > 0) {
        sent += (size_t)n;
      }
    }
    relay_all(&l);
    size_t want = reads[k++ % 5];
    want = want < len - got ? want : len - got;
    ssize_t n = tutti_seal_recv(l.b, dst + got, want);
    if (n > 0) {
      got += (size_t)n;
    } else if (n == 0 || errno != EAGAIN) {
      CHECK(0, "recv: %zd %s", n, strerror(errno));
      break;
    }
  }
  CHECK(memcmp(src, dst, len) == 0, "3 MiB arrive as sent");
  /* And the other way, a message smaller than a record. */
  send_all(&l, l.b, "pong", 4);
  char pong[4];
  CHECK(tutti_seal_recv(l.a, pong, 4) == 4 && memcmp(pong, "pong", 4) == 0, "the reply");
  free(src);
  free(dst);
  close_link(&l);
}

/* One record from a to b, its byte `flip` flipped on the way (-1: none),
 * sent twice to b when `replay`; what b's receive says. */
static int altered(long flip, int replay, char* why, size_t why_len) {
  struct link l;
  int ra, rb;
  open_link(&l, KEY, KEY);
  shake(&l, &ra, &rb);
  CHECK(ra == 0 && rb == 0, "handshake: %d %d", ra, rb);
  CHECK(tutti_seal_send(l.a, "payload!", 8) == 8, "send");
  unsigned char kept[256];
  size_t nk = 0;
  relay(l.x, l.y, flip, kept, &nk);
  if (!replay) { /* bytes behind it, for a header that now claims more */
    static const char more[100] = {0};
    CHECK(tutti_seal_send(l.a, more, sizeof more) == (ssize_t)sizeof more, "send");
    relay_all(&l);
  }
  char buf[16];
  ssize_t n = tutti_seal_recv(l.b, buf, sizeof buf);
  int err = n < 0 ? errno : 0;
  if (replay && n == 8) {
    CHECK(memcmp(buf, "payload!", 8) == 0, "the first copy");
    CHECK(send(l.y, kept, nk, 0) == (ssize_t)nk, "replay");
    n = tutti_seal_recv(l.b, buf, sizeof buf);
    err = n < 0 ? errno : 0;
  }
  snprintf(why, why_len, "%s", tutti_seal_strerror(l.b, err));
  close_link(&l);
  return err;
}

static void tamper(void) {
  char why[512];
  CHECK(altered(-1, 0, why, sizeof why) == 0, "untouched: %s", why);
  for (long at = 0; at < 4 + 8 + 16; at += 3) { /* header, body, tag */
    int err = altered(at, 0, why, sizeof why);
    CHECK(err == EBADMSG && strstr(why, "altered") != NULL, "byte %ld flipped: %d %s", at, err,
          why);
  }
  int err = altered(-1, 1, why, sizeof why);
  CHECK(err == EBADMSG && strstr(why, "replayed") != NULL, "a record replayed: %d %s", err, why);
}

static void wrong_key(void) {
  struct link l;
  int ra, rb;
  open_link(&l, KEY, KEY2);
  shake(&l, &ra, &rb);
  CHECK(ra == EKEYREJECTED && rb == EKEYREJECTED, "both ends refuse: %d %d", ra, rb);
  CHECK(strstr(tutti_seal_strerror(l.a, ra), "pre-shared keys differ") != NULL, "a says: %s",
        tutti_seal_strerror(l.a, ra));
  CHECK(strstr(tutti_seal_strerror(l.b, rb), "pre-shared keys differ") != NULL, "b says: %s",
        tutti_seal_strerror(l.b, rb));
  char c;
  CHECK(tutti_seal_recv(l.b, &c, 1) < 0 && errno == EKEYREJECTED, "no record after a refusal");
  CHECK(tutti_seal_send(l.a, "x", 1) < 0 && errno == EKEYREJECTED, "no send after a refusal");
  close_link(&l);
}

static void plaintext_peer(void) {
  struct link l;
  int ra, rb;
  open_link(&l, KEY, NULL);
  CHECK(send(l.b, "tuttiBS1 a plaintext hello......", 32, 0) == 32, "plain send");
  shake(&l, &ra, &rb);
  CHECK(ra == EPROTO && strstr(tutti_seal_strerror(l.a, ra), "does not encrypt") != NULL,
        "the encrypting end: %d %s", ra, tutti_seal_strerror(l.a, ra));
  close_link(&l);
}

/* In a child, before anything loaded OpenSSL: hidden, ncclSetEncryption
 * refuses with what to install; NONE still succeeds. */
static void hidden(void) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("TUTTI_TEST_HIDE_OPENSSL", "1", 1);
    ncclEncryptionConfig_t e = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
    e.mode = NCCL_ENCRYPTION_MODE_PSK;
    e.psk = KEY;
    int ok = ncclSetEncryption(&e) == ncclSystemError &&
             strstr(ncclGetLastError(NULL), "libssl3") != NULL;
    e.mode = NCCL_ENCRYPTION_MODE_NONE;
    ok = ok && ncclSetEncryption(&e) == ncclSuccess;
    _exit(ok ? 0 : 1);
  }
  int st = 0;
  CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
        "without OpenSSL ncclSetEncryption says what to install");
}

int main(void) {
  hidden();
  round_trip();
  tamper();
  wrong_key();
  plaintext_peer();
  return test_summary("seal");
}
