/* The store's table: a chained hash of keys to values, and named queues. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "util/hash.h"

struct tr_kv_queue {
  char* key;
  struct tr_kv* head; /* values, oldest first (key unused) */
  struct tr_kv* tail;
  size_t len;
  struct tr_kv_queue* next;
};

int tr_buf_reserve(struct tr_buf* b, size_t more) {
  if (b->cap - b->len >= more) {
    return 0;
  }
  size_t cap = b->cap == 0 ? 256 : b->cap;
  while (cap - b->len < more) {
    cap *= 2;
  }
  uint8_t* p = realloc(b->p, cap);
  if (p == NULL) {
    return -1;
  }
  b->p = p;
  b->cap = cap;
  return 0;
}

int tr_buf_put(struct tr_buf* b, const void* p, size_t n) {
  if (n == 0) {
    return 0;
  }
  if (tr_buf_reserve(b, n) != 0) {
    return -1;
  }
  memcpy(b->p + b->len, p, n);
  b->len += n;
  return 0;
}

void tr_buf_drop(struct tr_buf* b, size_t n) {
  memmove(b->p, b->p + n, b->len - n);
  b->len -= n;
}

static size_t hash(const char* s) {
  return (size_t)tutti_hash(s, strlen(s), TUTTI_HASH_INIT);
}

static struct tr_kv** slot(const struct tr_kv_table* t, const char* key) {
  if (t->nbuckets == 0) {
    return NULL;
  }
  struct tr_kv** p = &t->buckets[hash(key) % t->nbuckets];
  while (*p != NULL && strcmp((*p)->key, key) != 0) {
    p = &(*p)->next;
  }
  return p;
}

const struct tr_kv* tr_kv_find(const struct tr_kv_table* t, const char* key) {
  struct tr_kv** p = slot(t, key);
  return p != NULL ? *p : NULL;
}

static int grow(struct tr_kv_table* t) {
  if (t->count < t->nbuckets) {
    return 0;
  }
  size_t n = t->nbuckets == 0 ? 64 : 4 * t->nbuckets;
  struct tr_kv** b = calloc(n, sizeof *b);
  if (b == NULL) {
    return -1;
  }
  for (size_t i = 0; i < t->nbuckets; i++) {
    for (struct tr_kv *e = t->buckets[i], *next; e != NULL; e = next) {
      next = e->next;
      size_t h = hash(e->key) % n;
      e->next = b[h];
      b[h] = e;
    }
  }
  free(t->buckets);
  t->buckets = b;
  t->nbuckets = n;
  return 0;
}

/* The entry for key, created empty when missing; NULL: out of memory. */
static struct tr_kv* entry(struct tr_kv_table* t, const char* key) {
  struct tr_kv** p = slot(t, key);
  if (p != NULL && *p != NULL) {
    return *p;
  }
  if (grow(t) != 0) {
    return NULL;
  }
  struct tr_kv* e = calloc(1, sizeof *e);
  if (e == NULL || (e->key = strdup(key)) == NULL) {
    free(e);
    return NULL;
  }
  p = slot(t, key);
  *p = e;
  t->count++;
  return e;
}

static int assign(struct tr_kv* e, const void* v, size_t n, size_t keep) {
  uint8_t* p = realloc(e->val, keep + n + 1); /* +1: always NUL-terminated */
  if (p == NULL) {
    return -1;
  }
  memcpy(p + keep, v, n);
  p[keep + n] = '\0';
  e->val = p;
  e->vlen = keep + n;
  return 0;
}

int tr_kv_set(struct tr_kv_table* t, const char* key, const void* v, size_t n) {
  struct tr_kv* e = entry(t, key);
  return e != NULL ? assign(e, v, n, 0) : -1;
}

int tr_kv_append(struct tr_kv_table* t, const char* key, const void* v, size_t n) {
  struct tr_kv* e = entry(t, key);
  return e != NULL ? assign(e, v, n, e->vlen) : -1;
}

int tr_kv_add(struct tr_kv_table* t, const char* key, int64_t delta, int64_t* now) {
  struct tr_kv* e = entry(t, key);
  if (e == NULL) {
    return -1;
  }
  int64_t v = e->val != NULL ? strtoll((const char*)e->val, NULL, 10) : 0;
  char buf[32];
  *now = (int64_t)((uint64_t)v + (uint64_t)delta);
  snprintf(buf, sizeof buf, "%" PRId64, *now);
  return assign(e, buf, strlen(buf), 0);
}

const struct tr_kv* tr_kv_cas(struct tr_kv_table* t, const char* key, const void* expect,
                              size_t elen, const void* desired, size_t dlen) {
  const struct tr_kv* e = tr_kv_find(t, key);
  if (e == NULL && elen != 0) {
    return NULL;
  }
  if (e == NULL || (e->vlen == elen && memcmp(e->val, expect, elen) == 0)) {
    if (tr_kv_set(t, key, desired, dlen) != 0) {
      return NULL;
    }
  }
  return tr_kv_find(t, key);
}

int64_t tr_kv_delete(struct tr_kv_table* t, const char* key) {
  struct tr_kv** p = slot(t, key);
  if (p == NULL || *p == NULL) {
    return 0;
  }
  struct tr_kv* e = *p;
  *p = e->next;
  free(e->key);
  free(e->val);
  free(e);
  t->count--;
  return 1;
}

static struct tr_kv_queue* queue(const struct tr_kv_table* t, const char* key) {
  struct tr_kv_queue* q = t->queues;
  while (q != NULL && strcmp(q->key, key) != 0) {
    q = q->next;
  }
  return q;
}

int tr_kv_qpush(struct tr_kv_table* t, const char* key, const void* v, size_t n) {
  struct tr_kv_queue* q = queue(t, key);
  if (q == NULL) {
    q = calloc(1, sizeof *q);
    if (q == NULL || (q->key = strdup(key)) == NULL) {
      free(q);
      return -1;
    }
    q->next = t->queues;
    t->queues = q;
  }
  struct tr_kv* e = calloc(1, sizeof *e);
  if (e == NULL || assign(e, v, n, 0) != 0) {
    free(e);
    return -1;
  }
  if (q->tail != NULL) {
    q->tail->next = e;
  } else {
    q->head = e;
  }
  q->tail = e;
  q->len++;
  return 0;
}

size_t tr_kv_qlen(const struct tr_kv_table* t, const char* key) {
  const struct tr_kv_queue* q = queue(t, key);
  return q != NULL ? q->len : 0;
}

char* tr_kv_qpop(struct tr_kv_table* t, const char* key, size_t* n) {
  struct tr_kv_queue* q = queue(t, key);
  if (q == NULL || q->head == NULL) {
    return NULL;
  }
  struct tr_kv* e = q->head;
  q->head = e->next;
  q->tail = q->head == NULL ? NULL : q->tail;
  q->len--;
  char* v = (char*)e->val;
  *n = e->vlen;
  free(e);
  return v;
}

void tr_kv_clear(struct tr_kv_table* t) {
  for (size_t i = 0; i < t->nbuckets; i++) {
    for (struct tr_kv *e = t->buckets[i], *next; e != NULL; e = next) {
      next = e->next;
      free(e->key);
      free(e->val);
      free(e);
    }
  }
  free(t->buckets);
  for (struct tr_kv_queue *q = t->queues, *next; q != NULL; q = next) {
    next = q->next;
    for (struct tr_kv *e = q->head, *en; e != NULL; e = en) {
      en = e->next;
      free(e->val);
      free(e);
    }
    free(q->key);
    free(q);
  }
  memset(t, 0, sizeof *t);
}
