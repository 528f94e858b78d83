/* The text RAS sends between processes: a growing buffer, and this
 * process's ranks as lines ("HASH SIZE MADE {rank object}"), one per rank
 * of each communicator it holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ras/internal.h"
#include "util/json.h"

/* A rank's object: its last 64 operations are about 13 KB; its list of dead
 * peers may be as long as its communicator. */
#define RANK_JSON_MAX (256 * 1024)

void tutti_ras_buf_add(struct tutti_ras_buf* b, const char* s, size_t n) {
  if (b->failed) {
    return;
  }
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1) {
      cap *= 2;
    }
    char* t = realloc(b->text, cap);
    if (t == NULL) {
      b->failed = 1; /* a partial document is never sent */
      return;
    }
    b->text = t;
    b->cap = cap;
  }
  memcpy(b->text + b->len, s, n);
  b->len += n;
  b->text[b->len] = '\0';
}

void tutti_ras_buf_str(struct tutti_ras_buf* b, const char* s) {
  tutti_ras_buf_add(b, s, strlen(s));
}

void tutti_ras_buf_json(struct tutti_ras_buf* b, const char* s) {
  char chunk[512];
  size_t n = s != NULL ? strlen(s) : 0;
  if (s == NULL) {
    tutti_ras_buf_str(b, "null");
    return;
  }
  tutti_ras_buf_str(b, "\"");
  while (n > 0) {
    size_t used = 0;
    tutti_ras_buf_add(b, chunk, tutti_json_escape(s, n, &used, chunk, sizeof chunk));
    s += used;
    n -= used;
  }
  tutti_ras_buf_str(b, "\"");
}

void tutti_ras_buf_free(struct tutti_ras_buf* b) {
  free(b->text);
  memset(b, 0, sizeof *b);
}

void tutti_ras_local_lines(struct tutti_ras_buf* b, const struct tutti_ras_comm* only) {
  /* Kept for the next query (under tutti_ras_lock, as every caller is): a
   * fresh one would be mapped and unmapped each time. */
  static char* json;
  if (json == NULL) {
    json = malloc(RANK_JSON_MAX);
  }
  for (struct tutti_ras_comm* rc = tutti_ras_comms; rc != NULL && json != NULL; rc = rc->next) {
    if (only != NULL && rc != only) {
      continue;
    }
    char head[96];
    snprintf(head, sizeof head, "%016llx %d %s ", (unsigned long long)rc->hash, rc->nranks,
             rc->made);
    tutti_ras_buf_str(b, head);
    const size_t n = tutti_ras_rank_json(rc, json, RANK_JSON_MAX);
    tutti_ras_buf_add(b, json, n);
    tutti_ras_buf_str(b, "\n");
  }
}
