/* The whole job's document (docs/ras.md) from lines of this process and of
 * the others it asked. Another process's answer is checked before any of it
 * is kept: its size and lines bounded, each line's communicator size and
 * rank within what this process knows of that communicator (a rank it
 * holds a record of answers only from the address that rank published),
 * its rank object valid JSON. Communicators and ranks are found through
 * hash tables, so a hostile answer costs time linear in its bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ras/internal.h"
#include "util/json.h"

#define MAX_COMMS 4096
#define DOC_BYTES (64u << 20) /* the ranks' objects kept, all answers together */
/* Ranks of communicators this process does not hold that the document may
 * list without a line of their own. */
#define UNKNOWN_RANKS 65536
#define JSON_DEPTH 16

static const char* const made_names[] = {"init", "split", "shrink", "grow"};

struct comm {
  uint64_t hash;
  int size, made;
  unsigned char (*addr)[TUTTI_SOCKET_ADDR_WIRE]; /* a communicator held here: its ranks' */
};

struct slot {
  int comm, rank;
  size_t off, len; /* the rank's object in the arena */
};

struct tutti_ras_doc {
  struct comm* comms;
  int ncomms;
  unsigned* comm_table; /* index + 1; 0: empty */
  size_t comm_mask;
  struct slot* slots;
  size_t nslots, slots_cap;
  size_t* slot_table; /* index + 1; 0: empty */
  size_t slot_mask;
  struct tutti_ras_buf arena;
  int max_size; /* no communicator of this job is larger than the largest held here */
  long unknown_left;
};

static uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int find_comm(const struct tutti_ras_doc* d, uint64_t hash) {
  for (size_t i = mix(hash) & d->comm_mask;; i = (i + 1) & d->comm_mask) {
    const unsigned k = d->comm_table[i];
    if (k == 0) {
      return -1;
    }
    if (d->comms[k - 1].hash == hash) {
      return (int)k - 1;
    }
  }
}

/* Grown as communicators come (a query sees a few): the table stays at most
 * half full. */
static int add_comm(struct tutti_ras_doc* d, uint64_t hash, int size, int made) {
  if (d->ncomms == MAX_COMMS) {
    return -1;
  }
  if (2 * (size_t)(d->ncomms + 1) > d->comm_mask + 1) {
    const size_t cap = 2 * (d->comm_mask + 1);
    struct comm* comms = realloc(d->comms, cap / 2 * sizeof *comms);
    unsigned* table = calloc(cap, sizeof *table);
    if (comms != NULL) {
      d->comms = comms;
    }
    if (comms == NULL || table == NULL) {
      free(table);
      return -1;
    }
    for (int c = 0; c < d->ncomms; c++) {
      size_t i = mix(d->comms[c].hash) & (cap - 1);
      while (table[i] != 0) {
        i = (i + 1) & (cap - 1);
      }
      table[i] = (unsigned)c + 1;
    }
    free(d->comm_table);
    d->comm_table = table;
    d->comm_mask = cap - 1;
  }
  size_t i = mix(hash) & d->comm_mask;
  while (d->comm_table[i] != 0) {
    i = (i + 1) & d->comm_mask;
  }
  d->comms[d->ncomms] = (struct comm){hash, size, made, NULL};
  d->comm_table[i] = (unsigned)++d->ncomms;
  return d->ncomms - 1;
}

static size_t slot_hash(int comm, int rank) {
  return (size_t)mix(((uint64_t)(unsigned)comm << 32) ^ (uint64_t)(unsigned)rank);
}

static const struct slot* find_slot(const struct tutti_ras_doc* d, int comm, int rank) {
  if (d->slot_table == NULL) {
    return NULL;
  }
  for (size_t i = slot_hash(comm, rank) & d->slot_mask;; i = (i + 1) & d->slot_mask) {
    const size_t k = d->slot_table[i];
    if (k == 0) {
      return NULL;
    }
    if (d->slots[k - 1].comm == comm && d->slots[k - 1].rank == rank) {
      return &d->slots[k - 1];
    }
  }
}

/* Keeps rank `rank`'s object (json, len) unless one is kept already: the
 * first word stands (this process's own lines come first). */
static void add_slot(struct tutti_ras_doc* d, int comm, int rank, const char* json, size_t len) {
  if (find_slot(d, comm, rank) != NULL || d->arena.len + len > DOC_BYTES) {
    return;
  }
  if (2 * (d->nslots + 1) > d->slot_mask + 1 || d->slot_table == NULL) { /* half full: grow */
    const size_t size = d->slot_table == NULL ? 1024 : 2 * (d->slot_mask + 1);
    size_t* table = calloc(size, sizeof *table);
    if (table == NULL) {
      return;
    }
    for (size_t k = 0; k < d->nslots; k++) {
      size_t i = slot_hash(d->slots[k].comm, d->slots[k].rank) & (size - 1);
      while (table[i] != 0) {
        i = (i + 1) & (size - 1);
      }
      table[i] = k + 1;
    }
    free(d->slot_table);
    d->slot_table = table;
    d->slot_mask = size - 1;
  }
  if (d->nslots == d->slots_cap) {
    const size_t cap = d->slots_cap ? 2 * d->slots_cap : 256;
    struct slot* s = realloc(d->slots, cap * sizeof *s);
    if (s == NULL) {
      return;
    }
    d->slots = s;
    d->slots_cap = cap;
  }
  const size_t off = d->arena.len;
  tutti_ras_buf_add(&d->arena, json, len);
  if (d->arena.failed) {
    return;
  }
  d->slots[d->nslots] = (struct slot){comm, rank, off, len};
  size_t i = slot_hash(comm, rank) & d->slot_mask;
  while (d->slot_table[i] != 0) {
    i = (i + 1) & d->slot_mask;
  }
  d->slot_table[i] = ++d->nslots;
}

/* A decimal of 1 to 9 digits at *p (advanced past it), or -1. */
static int decimal(const char** p, const char* end) {
  int v = 0, n = 0;
  while (*p < end && **p >= '0' && **p <= '9' && n < 9) {
    v = v * 10 + (*(*p)++ - '0');
    n++;
  }
  return n > 0 && (*p == end || **p < '0' || **p > '9') ? v : -1;
}

/* One line "HASH SIZE MADE {rank object}" (no newline) from the process at
 * `from` (NULL: this one). 1 when kept, else 0. */
static int add_line(struct tutti_ras_doc* d, const char* line, size_t n,
                    const unsigned char* from) {
  const char* p = line;
  const char* end = line + n;
  uint64_t hash = 0;
  if (n > TUTTI_RAS_LINE_MAX || n < 20 || line[16] != ' ') {
    return 0;
  }
  for (int i = 0; i < 16; i++, p++) {
    const char c = *p;
    const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0) {
      return 0;
    }
    hash = hash << 4 | (uint64_t)v;
  }
  p++;
  const int size = decimal(&p, end);
  if (size <= 0 || p == end || *p++ != ' ') {
    return 0;
  }
  int made = -1;
  for (int i = 0; i < 4 && made < 0; i++) {
    const size_t k = strlen(made_names[i]);
    if ((size_t)(end - p) > k && memcmp(p, made_names[i], k) == 0 && p[k] == ' ') {
      made = i;
      p += k + 1;
    }
  }
  static const char open[] = "{\"rank\":";
  const char* json = p;
  if (made < 0 || (size_t)(end - p) < sizeof open || memcmp(p, open, sizeof open - 1) != 0) {
    return 0;
  }
  p += sizeof open - 1;
  const int rank = decimal(&p, end);
  if (rank < 0 || rank >= size || p == end || (*p != ',' && *p != '}') ||
      !tutti_json_valid(json, (size_t)(end - json), JSON_DEPTH)) {
    return 0;
  }
  int c = find_comm(d, hash);
  if (c >= 0 && d->comms[c].size != size) { /* `made` may differ (a rank that joined a grow) */
    return 0;
  }
  if (c >= 0 && from != NULL && d->comms[c].addr != NULL &&
      memcmp(d->comms[c].addr[rank], from, TUTTI_SOCKET_ADDR_WIRE) != 0) {
    return 0; /* a rank of a communicator held here, answered for by another process */
  }
  if (c < 0) {
    if (size > d->max_size || size > d->unknown_left || (c = add_comm(d, hash, size, made)) < 0) {
      return 0;
    }
    d->unknown_left -= size;
  }
  const size_t before = d->nslots;
  add_slot(d, c, rank, json, (size_t)(end - json));
  return d->nslots > before;
}

static int add_text(struct tutti_ras_doc* d, const char* text, size_t len,
                    const unsigned char* from) {
  int kept = 0;
  for (const char* p = text; p < text + len;) {
    const char* nl = memchr(p, '\n', (size_t)(text + len - p));
    const char* end = nl != NULL ? nl : text + len;
    kept += add_line(d, p, (size_t)(end - p), from);
    p = end + 1;
  }
  return kept;
}

static int made_index(const char* made) {
  for (int i = 0; i < 4; i++) {
    if (strcmp(made, made_names[i]) == 0) {
      return i;
    }
  }
  return 0;
}

struct tutti_ras_doc* tutti_ras_doc_new_locked(const struct tutti_ras_comm* only) {
  struct tutti_ras_doc* d = calloc(1, sizeof *d);
  if (d == NULL || (d->comms = calloc(8, sizeof *d->comms)) == NULL ||
      (d->comm_table = calloc(16, sizeof *d->comm_table)) == NULL) {
    tutti_ras_doc_free(d);
    return NULL;
  }
  d->comm_mask = 15;
  d->unknown_left = UNKNOWN_RANKS;
  for (const struct tutti_ras_comm* rc = tutti_ras_comms; rc != NULL; rc = rc->next) {
    if ((only != NULL && rc != only) || find_comm(d, rc->hash) >= 0) {
      continue;
    }
    const int c = add_comm(d, rc->hash, rc->nranks, made_index(rc->made));
    if (c < 0) {
      break;
    }
    d->comms[c].addr = malloc((size_t)rc->nranks * sizeof *d->comms[c].addr);
    for (int r = 0; r < rc->nranks && d->comms[c].addr != NULL; r++) {
      memcpy(d->comms[c].addr[r], rc->peers[r].ras, TUTTI_SOCKET_ADDR_WIRE);
    }
    d->max_size = rc->nranks > d->max_size ? rc->nranks : d->max_size;
  }
  struct tutti_ras_buf lines = {0};
  tutti_ras_local_lines(&lines, only);
  if (lines.text != NULL) {
    add_text(d, lines.text, lines.len, NULL);
  }
  tutti_ras_buf_free(&lines);
  return d;
}

int tutti_ras_doc_add(struct tutti_ras_doc* d, const char* text, size_t len,
                      const unsigned char* from) {
  size_t lines = 0;
  for (const char* p = text; p != NULL && p < text + len; lines++) {
    p = memchr(p, '\n', (size_t)(text + len - p));
    p = p != NULL ? p + 1 : NULL;
  }
  if (len > TUTTI_RAS_REPLY_BYTES || lines > TUTTI_RAS_REPLY_LINES) {
    return -1;
  }
  return add_text(d, text, len, from);
}

void tutti_ras_doc_fill_locked(struct tutti_ras_doc* d, const struct tutti_ras_comm* only) {
  for (const struct tutti_ras_comm* rc = tutti_ras_comms; rc != NULL; rc = rc->next) {
    const int c = only != NULL && rc != only ? -1 : find_comm(d, rc->hash);
    for (int r = 0; c >= 0 && r < rc->nranks && r < d->comms[c].size; r++) {
      if (find_slot(d, c, r) != NULL) {
        continue;
      }
      const struct tutti_peer_info* pi = &rc->peers[r];
      struct tutti_ras_buf b = {0};
      char num[96];
      snprintf(num, sizeof num, "{\"rank\":%d,\"host\":", r);
      tutti_ras_buf_str(&b, num);
      char host[sizeof pi->hostname + 1];
      memcpy(host, pi->hostname, sizeof pi->hostname);
      host[sizeof pi->hostname] = '\0';
      tutti_ras_buf_json(&b, host);
      snprintf(num, sizeof num, ",\"pid\":%d,\"gpu\":%d,\"state\":\"%s\"}", (int)pi->pid,
               pi->cuda_dev, tutti_ras_peer_state(rc, r));
      tutti_ras_buf_str(&b, num);
      if (!b.failed && b.text != NULL) {
        add_slot(d, c, r, b.text, b.len);
      }
      tutti_ras_buf_free(&b);
    }
  }
}

void tutti_ras_doc_write(struct tutti_ras_doc* d, const char* reason, struct tutti_ras_buf* out) {
  char head[160];
  snprintf(head, sizeof head, "{\"tutti_ras\":1,\"time_ns\":%llu,\"from_pid\":%d,\"reason\":",
           (unsigned long long)tutti_ras_now_ns(), (int)getpid());
  tutti_ras_buf_str(out, head);
  tutti_ras_buf_json(out, reason);
  tutti_ras_buf_str(out, ",\"communicators\":[");
  for (int c = 0; d != NULL && c < d->ncomms; c++) {
    const struct comm* k = &d->comms[c];
    snprintf(head, sizeof head, "%s{\"hash\":\"%016llx\",\"size\":%d,\"made\":", c ? "," : "",
             (unsigned long long)k->hash, k->size);
    tutti_ras_buf_str(out, head);
    tutti_ras_buf_json(out, made_names[k->made]);
    tutti_ras_buf_str(out, ",\"ranks\":[");
    for (int r = 0; r < k->size && !out->failed; r++) {
      const struct slot* s = find_slot(d, c, r);
      tutti_ras_buf_str(out, r ? "," : "");
      if (s != NULL) {
        tutti_ras_buf_add(out, d->arena.text + s->off, s->len);
      } else {
        snprintf(head, sizeof head, "{\"rank\":%d,\"state\":\"unreachable\"}", r);
        tutti_ras_buf_str(out, head);
      }
    }
    tutti_ras_buf_str(out, "]}");
  }
  tutti_ras_buf_str(out, "]}\n");
}

void tutti_ras_doc_free(struct tutti_ras_doc* d) {
  if (d == NULL) {
    return;
  }
  for (int c = 0; d->comms != NULL && c < d->ncomms; c++) {
    free(d->comms[c].addr);
  }
  free(d->comms);
  free(d->comm_table);
  free(d->slots);
  free(d->slot_table);
  tutti_ras_buf_free(&d->arena);
  free(d);
}
