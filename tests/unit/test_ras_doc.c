/* RAS's document from other processes' answers (ras/doc.c), fed what a
 * hostile peer that holds the job's secret could send: bounds broken, sizes
 * forged, 300,000 distinct lines, lines breaking out of their object,
 * ranks it does not hold. Each must be refused in time linear in its bytes,
 * and the document must stay one valid JSON text with the true ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "ras/internal.h"
#include "util/json.h"

#define HASH 0x0123456789abcdefull

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static struct tutti_peer_info peers[4];
static struct tutti_ras_comm rc;

static void addr_of(int r, unsigned char out[TUTTI_SOCKET_ADDR_WIRE]) {
  memset(out, 0, TUTTI_SOCKET_ADDR_WIRE);
  out[1] = 4;
  out[2] = 0x40;
  out[3] = (unsigned char)r; /* port 0x40rr: one process per rank */
  out[8] = 127;
  out[11] = 1;
}

static struct tutti_ras_doc* fresh(void) {
  pthread_mutex_lock(&tutti_ras_lock);
  struct tutti_ras_doc* d = tutti_ras_doc_new_locked(NULL);
  pthread_mutex_unlock(&tutti_ras_lock);
  return d;
}

static char* finish(struct tutti_ras_doc* d) {
  struct tutti_ras_buf out = {0};
  pthread_mutex_lock(&tutti_ras_lock);
  tutti_ras_doc_fill_locked(d, NULL);
  pthread_mutex_unlock(&tutti_ras_lock);
  tutti_ras_doc_write(d, "a \"quoted\"\nreason", &out);
  tutti_ras_doc_free(d);
  CHECK(out.text != NULL && tutti_json_valid(out.text, out.len, 64), "the document is JSON");
  return out.text;
}

static char* lines(size_t n, const char* fmt, int vary) {
  char* text = malloc(n * 96 + 1);
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    at += (size_t)sprintf(text + at, fmt, (unsigned long long)(vary ? HASH ^ (i + 1) : HASH));
  }
  text[at] = '\0';
  return text;
}

int main(void) {
  for (int r = 0; r < 4; r++) {
    peers[r].rank = r;
    peers[r].pid = 1000 + r;
    peers[r].cuda_dev = -1;
    snprintf(peers[r].hostname, sizeof peers[r].hostname, "h\"%d", r); /* a quote to escape */
    addr_of(r, peers[r].ras);
  }
  rc.hash = HASH;
  rc.nranks = 4;
  rc.made = "init";
  rc.peers = peers;
  rc.waits_for = -1;
  tutti_ras_register(&rc);
  unsigned char from3[TUTTI_SOCKET_ADDR_WIRE];
  addr_of(3, from3);

  /* 300,000 distinct lines: refused whole, at once. */
  double t0 = now();
  struct tutti_ras_doc* d = fresh();
  char* many = lines(300000, "%016llx 4 init {\"rank\":0}\n", 1);
  CHECK(tutti_ras_doc_add(d, many, strlen(many), from3) == -1, "300,000 lines refused");
  free(many);
  char* doc = finish(d);
  CHECK(strstr(doc, "0123456789abcdee") == NULL, "nothing of them kept");
  free(doc);
  CHECK(now() - t0 < 1.0, "refused in %.3f s", now() - t0);

  /* Forged sizes: 10,000,000 for this communicator and for an unknown one. */
  d = fresh();
  char forged[256];
  snprintf(forged, sizeof forged,
           "%016llx 10000000 init {\"rank\":3}\n%016llx 10000000 init {\"rank\":9999999}\n", HASH,
           HASH ^ 1);
  CHECK(tutti_ras_doc_add(d, forged, strlen(forged), from3) == 0, "forged sizes kept nothing");
  doc = finish(d);
  CHECK(strlen(doc) < 4096 && strstr(doc, "10000000") == NULL, "a small document: %zu bytes",
        strlen(doc));
  free(doc);

  /* Within the bounds but hostile: only rank 3's own, well-formed line stays. */
  d = fresh();
  const char* hostile =
      "0123456789abcdef 4 init {\"rank\":0,\"forged\":1}\n"        /* not its rank */
      "0123456789abcdef 4 init\",\"x\":\"y {\"rank\":3}\n"         /* made breaks out */
      "0123456789abcdef 4 init {\"rank\":3}]}],\"x\":[{\"a\":1}\n" /* object breaks out */
      "0123456789abcdef 4 init {\"rank\":4}\n"                     /* beyond the size */
      "0123456789abcdef 5 init {\"rank\":3}\n"                     /* another size */
      "0123456789abcde 4 init {\"rank\":3}\n"                      /* a short hash */
      "0123456789ABCDEF 4 init {\"rank\":3}\n"                     /* not the hash's form */
      "0123456789abcdef 4 init {\"rank\":3,\"state\":\"idle\",\"mine\":1}\n"
      "0123456789abcdef 4 init {\"rank\":3,\"state\":\"idle\",\"again\":1}\n";
  CHECK(tutti_ras_doc_add(d, hostile, strlen(hostile), from3) == 1, "one line kept");
  doc = finish(d);
  CHECK(strstr(doc, "\"mine\":1") != NULL && strstr(doc, "forged") == NULL &&
            strstr(doc, "again") == NULL && strstr(doc, "\"x\"") == NULL,
        "rank 3's first line only: %s", doc);
  CHECK(strstr(doc, "\"made\":\"init\"") != NULL && strstr(doc, "h\\\"0") != NULL &&
            strstr(doc, "a \\\"quoted\\\"\\nreason") != NULL,
        "fields escaped: %s", doc);
  free(doc);

  /* 256 processes answering 1024 lines each of communicators held nowhere
   * here: linear, and bounded by what the document may list. */
  t0 = now();
  d = fresh();
  for (int p = 0; p < 256; p++) {
    char* text = malloc(1024 * 64);
    size_t at = 0;
    for (int i = 0; i < 1024; i++) {
      at += (size_t)sprintf(text + at, "%016llx 4 init {\"rank\":%d}\n",
                            (unsigned long long)(HASH ^ (uint64_t)(p * 1024 + i + 1) << 8), i % 4);
    }
    CHECK(tutti_ras_doc_add(d, text, at, NULL) >= 0, "an answer within the bounds");
    free(text);
  }
  doc = finish(d);
  size_t comms = 0;
  for (const char* p = doc; (p = strstr(p, "\"hash\":")) != NULL; p++) {
    comms++;
  }
  CHECK(comms <= 4096 && comms > 1000, "%zu communicators listed", comms);
  /* Linear: about 0.1 s in a release build, 2.6 under ThreadSanitizer; checks
   * quadratic in the lines would take minutes. */
  CHECK(now() - t0 < 10.0, "262,144 lines in %.3f s", now() - t0);
  free(doc);

  tutti_ras_unregister(&rc);
  return test_summary("ras_doc");
}
