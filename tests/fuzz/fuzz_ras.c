/* Another process's RAS answer, as the asked process checks it before any of
 * it goes into the job's document (ras/doc.c): lines of "HASH SIZE MADE
 * {rank object}" from whoever proved the communicator's secret. Whatever it
 * sends, the document must stay one valid JSON text of bounded size, with
 * this process's communicator at its true size.
 *
 * The target compiles doc.c itself. Input: the answer's bytes, from the
 * address of rank 3 of a 4-rank communicator 0123456789abcdef held here. */
#include "ras/doc.c"

#include "fuzz.h"

static struct tutti_peer_info peers[4];
static struct tutti_ras_comm rc;

static void setup(void) {
  for (int r = 0; r < 4; r++) {
    peers[r].rank = r;
    peers[r].pid = 1000 + r;
    peers[r].cuda_dev = -1;
    snprintf(peers[r].hostname, sizeof peers[r].hostname, "h%d", r);
    peers[r].ras[1] = 4;
    peers[r].ras[2] = 0x40;
    peers[r].ras[3] = (unsigned char)r;
    peers[r].ras[8] = 127;
    peers[r].ras[11] = 1;
  }
  rc.hash = 0x0123456789abcdefull;
  rc.nranks = 4;
  rc.made = "init";
  rc.peers = peers;
  rc.waits_for = -1;
  tutti_ras_register(&rc);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int ready;
  if (!ready) {
    setup();
    ready = 1;
  }
  pthread_mutex_lock(&tutti_ras_lock);
  struct tutti_ras_doc* d = tutti_ras_doc_new_locked(NULL);
  pthread_mutex_unlock(&tutti_ras_lock);
  FUZZ_ASSERT(d != NULL, "no document");
  const int kept = tutti_ras_doc_add(d, (const char*)data, size, peers[3].ras);
  FUZZ_ASSERT(kept >= -1 && kept <= TUTTI_RAS_REPLY_LINES, "%d lines kept", kept);
  pthread_mutex_lock(&tutti_ras_lock);
  tutti_ras_doc_fill_locked(d, NULL);
  pthread_mutex_unlock(&tutti_ras_lock);
  struct tutti_ras_buf out = {0};
  tutti_ras_doc_write(d, "fuzz", &out);
  tutti_ras_doc_free(d);
  FUZZ_ASSERT(out.text != NULL && tutti_json_valid(out.text, out.len, 64),
              "the document is not JSON: %.200s", out.text != NULL ? out.text : "(none)");
  /* Every rank object comes from the input or is one this process makes. */
  FUZZ_ASSERT(out.len < 2 * size + (size_t)UNKNOWN_RANKS * 40 + 4096, "%zu bytes from %zu", out.len,
              size);
  FUZZ_ASSERT(strstr(out.text, "{\"hash\":\"0123456789abcdef\",\"size\":4,") != NULL,
              "this process's communicator changed: %.300s", out.text);
  tutti_ras_buf_free(&out);
  return 0;
}
