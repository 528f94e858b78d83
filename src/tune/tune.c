/* NCCL_ALGO (parsed here, once), the queues' sizes and the rounds they
 * allow. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "tune/internal.h"
#include "util/log.h"
#include "util/param.h"

static unsigned allowed_mask[TUTTI_COLL_COUNT];
static pthread_once_t algo_once = PTHREAD_ONCE_INIT;

static unsigned algo_bits(const char* list) {
  unsigned bits = 0;
  int invert = list[0] == '^';
  char buf[256];
  snprintf(buf, sizeof buf, "%s", list + invert);
  char* save = NULL;
  for (char* tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    int known = 0;
    for (int id = 0; id < TUTTI_ALGO_COUNT; id++) {
      if (strcasecmp(tok, tutti_algo_get(id)->name) == 0) {
        bits |= 1u << id;
        known = 1;
      }
    }
    /* NCCL's names: its Tree is host-hierarchical too; the others are
     * one-round algorithms on one host, tutti's Direct (and, for NVLink
     * SHARP's, the mapped kernel on device buffers). */
    if (strcasecmp(tok, "Tree") == 0 || strcasecmp(tok, "CollnetChain") == 0) {
      bits |= 1u << TUTTI_ALGO_HIER;
      known = 1;
    }
    if (strcasecmp(tok, "NVLS") == 0 || strcasecmp(tok, "NVLSTree") == 0) {
      bits |= 1u << TUTTI_ALGO_DIRECT | 1u << TUTTI_ALGO_MAPPED;
      known = 1;
    }
    if (strcasecmp(tok, "CollnetDirect") == 0 || strcasecmp(tok, "PAT") == 0) {
      bits |= 1u << TUTTI_ALGO_DIRECT;
      known = 1;
    }
    if (!known) {
      WARN(
          "NCCL_ALGO names \"%s\", which tutti does not know: use Ring, Direct, Hier, Tree, "
          "Pull, Board, Mapped or CE",
          tok);
    }
  }
  unsigned all = (1u << TUTTI_ALGO_COUNT) - 1;
  return invert ? (all & ~bits) : bits;
}

void tutti_tune_parse_algo(const char* spec, unsigned allowed[TUTTI_COLL_COUNT]) {
  unsigned all = (1u << TUTTI_ALGO_COUNT) - 1;
  for (int c = 0; c < TUTTI_COLL_COUNT; c++) {
    allowed[c] = all;
  }
  if (spec == NULL || *spec == '\0') {
    return;
  }
  if (strchr(spec, ':') == NULL) {
    unsigned bits = algo_bits(spec);
    for (int c = 0; c < TUTTI_COLL_COUNT; c++) {
      allowed[c] = bits;
    }
    return;
  }
  /* Per collective: "allreduce:ring;broadcast:direct". */
  char buf[512];
  snprintf(buf, sizeof buf, "%s", spec);
  char* save = NULL;
  for (char* part = strtok_r(buf, ";", &save); part != NULL; part = strtok_r(NULL, ";", &save)) {
    char* colon = strchr(part, ':');
    if (colon == NULL) {
      continue;
    }
    *colon = '\0';
    for (int c = 0; c < TUTTI_COLL_COUNT; c++) {
      if (strcasecmp(part, tutti_coll_name(c)) == 0) {
        allowed[c] = algo_bits(colon + 1);
      }
    }
  }
}

static TUTTI_PARAM_STR(algo, "NCCL_ALGO", NULL,
                       "a comma list of Ring, Direct, Hier, Tree, Pull, Board, Mapped, CE or "
                       "NCCL's names (any case); a leading ^ leaves them out; per collective: "
                       "coll:list;coll:list",
                       "the algorithms calls may use, read once (unset: all)");

static int algo_named; /* NCCL_ALGO was given */

static void load_algo_env(void) {
  const char* spec = tutti_param_algo();
  algo_named = spec != NULL && spec[0] != '\0';
  tutti_tune_parse_algo(spec, allowed_mask);
}

int tutti_tune_algo_named(void) {
  pthread_once(&algo_once, load_algo_env);
  return algo_named;
}

unsigned tutti_tune_allowed(enum tutti_coll coll) {
  pthread_once(&algo_once, load_algo_env);
  return allowed_mask[coll];
}

static TUTTI_PARAM(buffsize, "NCCL_BUFFSIZE", 1 << 20,
                   "bytes of each connection's queue (unset: 4 MB for host queues when every "
                   "rank is alone on its host in a job of 2 to 9, for device queues 4 MB, 1 MB "
                   "through the network proxy)");

size_t tutti_tune_queue_bytes(int nranks, int nhosts) {
  /* Every rank alone on its host (all peers over the network) in a small
   * job: 4 MB queues unless NCCL_BUFFSIZE says otherwise. Rounds are half a
   * queue and each costs a network round trip: across two namespace hosts,
   * allreduce ran at 0.35 GB/s with 1 MB queues and 0.7 GB/s with 4 MB. With
   * shared memory in play the queues stay small (/dev/shm is often small). */
  size_t q = (size_t)tutti_param_buffsize();
  if (nranks > 1 && nranks <= 9 && nhosts == nranks && tutti_getenv("NCCL_BUFFSIZE") == NULL &&
      q < (4u << 20)) {
    q = 4u << 20;
  }
  return q;
}

size_t tutti_tune_device_queue_bytes(int net) {
  /* NCCL_BUFFSIZE when set; else 4 MB per queue, as NCCL's simple protocol;
   * through the network proxy 1 MB (pinned host memory). */
  return tutti_getenv("NCCL_BUFFSIZE") != NULL ? (size_t)tutti_param_buffsize()
         : net                                 ? (size_t)1 << 20
                                               : (size_t)4 << 20;
}

size_t tutti_tune_chunk(size_t queue_bytes, size_t piece_bytes) {
  size_t c = queue_bytes / 2;
  if (piece_bytes > 0) {
    c -= c % piece_bytes;
    c = c < piece_bytes ? piece_bytes : c;
  }
  return c;
}

int tutti_tune_inter(const struct tutti_coll_args* a) {
  return tutti_tune_table_inter(a);
}
