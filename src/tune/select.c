/* ncclCollConfig_t.algSelection: the algorithms one call may use, as NCCL
 * 2.31 spells them ("," or, "+" and, "^" not; a name matches every entry it
 * begins, in any case) over tutti's names and NCCL's. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "tune/internal.h"

#define B(id) (1u << (id))

/* NCCL's algorithm-and-protocol names onto what runs them here: its Tree is
 * host-hierarchical too (as NCCL_ALGO reads it, tune.c), CollNet and PAT are
 * one-round exchanges, NVLink SHARP and the symmetric kernels are one round
 * or, on device buffers, the mapped kernel. Protocols are tune's choice. */
static const struct {
  const char* name;
  unsigned bits;
} names[] = {
    {"Ring", B(TUTTI_ALGO_RING)},
    {"Direct", B(TUTTI_ALGO_DIRECT)},
    {"Hier", B(TUTTI_ALGO_HIER)},
    {"Tree", B(TUTTI_ALGO_TREE)},
    {"Pull", B(TUTTI_ALGO_PULL)},
    {"Board", B(TUTTI_ALGO_BOARD)},
    {"Mapped", B(TUTTI_ALGO_MAPPED)},
    {"CE", B(TUTTI_ALGO_CE)},
    {"TREE_LL", B(TUTTI_ALGO_TREE) | B(TUTTI_ALGO_HIER)},
    {"TREE_LL128", B(TUTTI_ALGO_TREE) | B(TUTTI_ALGO_HIER)},
    {"TREE_SIMPLE", B(TUTTI_ALGO_TREE) | B(TUTTI_ALGO_HIER)},
    {"RING_LL", B(TUTTI_ALGO_RING)},
    {"RING_LL128", B(TUTTI_ALGO_RING)},
    {"RING_SIMPLE", B(TUTTI_ALGO_RING)},
    {"COLLNET_DIRECT_SIMPLE", B(TUTTI_ALGO_DIRECT)},
    {"COLLNET_CHAIN_SIMPLE", B(TUTTI_ALGO_HIER)},
    {"NVLS_SIMPLE", B(TUTTI_ALGO_DIRECT) | B(TUTTI_ALGO_MAPPED)},
    {"NVLSTREE_SIMPLE", B(TUTTI_ALGO_DIRECT) | B(TUTTI_ALGO_MAPPED)},
    {"PAT_SIMPLE", B(TUTTI_ALGO_DIRECT)},
    {"SYMK_AGxLL_R", B(TUTTI_ALGO_MAPPED)},
    {"SYMK_AGxLLMC_R", B(TUTTI_ALGO_MAPPED)},
    {"SYMK_RSxTmaLD_AGxTmaST", B(TUTTI_ALGO_MAPPED)},
    {"SYMK_RSxLD_AGxST", B(TUTTI_ALGO_MAPPED)},
    {"SYMK_RSxLDMC_AGxSTMC", B(TUTTI_ALGO_MAPPED)},
    {"SYMK_LL", B(TUTTI_ALGO_MAPPED)},
    {"SYMK_LLMC", B(TUTTI_ALGO_MAPPED)},
    {"SYMK_TmaST", B(TUTTI_ALGO_MAPPED)},
    {"SYMK_ST", B(TUTTI_ALGO_MAPPED)},
    {"SYMK_TmaSTMC", B(TUTTI_ALGO_MAPPED)},
    {"SYMK_STMC", B(TUTTI_ALGO_MAPPED)},
    {"SYMK_RailRing_LsaSTMC", B(TUTTI_ALGO_MAPPED)},
    {"SYMK_TmaLD", B(TUTTI_ALGO_MAPPED)},
    {"SYMK_LD", B(TUTTI_ALGO_MAPPED)},
    {"SYMK_LDMC", B(TUTTI_ALGO_MAPPED)},
    {"SYMK_RailA2A_LsaLD", B(TUTTI_ALGO_MAPPED)},
    {"SYMK_RailA2A_LsaLDMC", B(TUTTI_ALGO_MAPPED)},
};

static unsigned tag_bits(const char* tag) {
  const size_t n = strlen(tag);
  unsigned bits = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (strncasecmp(names[i].name, tag, n) == 0) {
      bits |= names[i].bits;
    }
  }
  return bits;
}

int tutti_tune_parse_selection(const char* sel, unsigned* mask, char* err, size_t errlen) {
  const unsigned all = (1u << TUTTI_ALGO_COUNT) - 1;
  char buf[512];
  size_t len = 0;
  *mask = 0;
  for (const char* p = sel; p != NULL && *p != '\0'; p++) {
    if (isspace((unsigned char)*p)) {
      continue;
    }
    if (len + 1 >= sizeof buf) {
      snprintf(err, errlen, "it is longer than %zu characters", sizeof buf - 1);
      return -1;
    }
    buf[len++] = *p;
  }
  buf[len] = '\0';
  char* save = NULL;
  for (char* term = strtok_r(buf, ",", &save); term != NULL; term = strtok_r(NULL, ",", &save)) {
    unsigned t = all;
    int factors = 0;
    char* fsave = NULL;
    for (char* f = strtok_r(term, "+", &fsave); f != NULL; f = strtok_r(NULL, "+", &fsave)) {
      const int neg = f[0] == '^';
      const char* tag = f + neg;
      const unsigned b = tag[0] != '\0' ? tag_bits(tag) : 0;
      if (b == 0) {
        snprintf(err, errlen,
                 "\"%s\" names no algorithm (tutti's: Ring, Direct, Hier, Tree, "
                 "Pull, Board, Mapped, CE; NCCL's: RING_*, TREE_*, COLLNET_*, NVLS*, PAT_*, "
                 "SYMK_*)",
                 f);
        return -1;
      }
      t &= neg ? (all & ~b) : b;
      factors++;
    }
    if (factors == 0 || t == 0) {
      snprintf(err, errlen, "a term of it selects nothing");
      return -1;
    }
    *mask |= t;
  }
  return 0;
}

unsigned tutti_tune_implements(enum tutti_coll coll) {
  unsigned bits = B(TUTTI_ALGO_MAPPED) | B(TUTTI_ALGO_CE); /* device paths: at launch */
  for (int id = 0; id < TUTTI_ALGO_COUNT; id++) {
    if (tutti_algo_get((enum tutti_algo_id)id)->build[coll] != NULL) {
      bits |= B(id);
    }
  }
  return bits;
}

unsigned tutti_tune_runnable(const struct tutti_coll_args* a, unsigned mask) {
  unsigned bits = 0;
  for (int id = 0; id < TUTTI_ALGO_COUNT; id++) {
    if (!(mask & B(id))) {
      continue;
    }
    const int path = id == TUTTI_ALGO_MAPPED || id == TUTTI_ALGO_CE;
    if (path ? a->device : tutti_tune_table_can_run(a, (enum tutti_algo_id)id)) {
      bits |= B(id);
    }
  }
  return bits;
}

unsigned tutti_tune_call_allowed(const struct tutti_coll_args* a) {
  const unsigned env = tutti_tune_allowed(a->coll);
  const unsigned both = env & a->call_algos;
  /* NCCL_ALGO outranks a call's selection, as in NCCL. */
  return a->call_algos != 0 && both != 0 ? both : env;
}
