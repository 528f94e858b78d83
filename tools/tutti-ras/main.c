/* tutti-ras: where every rank of a running job is, asked from outside
 * (each process of the job answers on NCCL_RAS_ADDR), or read from the
 * flight records its ranks wrote when it failed; a verdict line first
 * names the rank that holds a communicator up (docs/ras.md). */
#define _GNU_SOURCE 1
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ras.h"

static void usage(FILE* f) {
  fprintf(f,
          "Usage: tutti-ras [-a HOST:PORT|SOCKET] [--key-file FILE] [--json]\n"
          "       tutti-ras --read FILE... [--json]\n"
          "Asks a running tutti job of this user on this host where every rank is\n"
          "(on a Unix socket in the user's private directory, or on NCCL_RAS_ADDR\n"
          "when the job was given one), or merges the flight records\n"
          "(tutti-ras-*.json) its ranks wrote when it failed. A verdict line first\n"
          "names the rank that holds a communicator up, a slow rank, a dead one.\n"
          "  -a, --addr ADDR       the job's TCP address HOST:PORT, or a socket's path\n"
          "                        (default: $NCCL_RAS_ADDR, else the user's socket)\n"
          "  --key-file FILE       the job's ncclSetEncryption key (its first line), for\n"
          "                        a TCP address of a job that encrypts\n"
          "  --json                the document with its verdicts, as JSON (docs/ras.md)\n"
          "  --read FILE...        flight records instead of a live job\n"
          "  -h, --help            this text\n");
}

static char* slurp_fd(int fd, double timeout_s) {
  size_t cap = 65536, n = 0;
  char* buf = malloc(cap);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (buf != NULL) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    const double left =
        timeout_s - ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9);
    struct pollfd p = {fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) <= 0) {
      break;
    }
    if (n + 4096 > cap) {
      char* b = realloc(buf, cap *= 2);
      if (b == NULL) {
        break;
      }
      buf = b;
    }
    const ssize_t k = read(fd, buf + n, cap - n - 1);
    if (k <= 0) {
      break;
    }
    n += (size_t)k;
  }
  if (buf != NULL) {
    buf[n] = '\0';
  }
  return buf;
}

/* A rank's record outranks what others knew of it: dead beats unreachable. */
static int rank_weight(const struct jv* r) {
  const char* st = json_str(r, "state", "unreachable");
  return json_get(r, "calls") != NULL ? 3 : strcmp(st, "dead") == 0 ? 2 : 1;
}

/* Merges `doc`'s communicators into `into` (a document), rank by rank. */
static void merge(struct jv* into, struct jv* doc) {
  struct jv* dst = json_get(into, "communicators");
  struct jv* src = json_get(doc, "communicators");
  for (int i = 0; src != NULL && src->t == J_ARR && i < src->n; i++) {
    struct jv* c = src->items[i];
    struct jv* have = NULL;
    for (int j = 0; j < dst->n && have == NULL; j++) {
      if (strcmp(json_str(dst->items[j], "hash", ""), json_str(c, "hash", "?")) == 0) {
        have = dst->items[j];
      }
    }
    if (have == NULL) {
      src->items[i] = json_new(J_NULL); /* moved */
      json_add(dst, NULL, c);
      continue;
    }
    struct jv* hr = json_get(have, "ranks");
    struct jv* cr = json_get(c, "ranks");
    for (int k = 0; cr != NULL && hr != NULL && k < cr->n && k < hr->n; k++) {
      if (rank_weight(cr->items[k]) > rank_weight(hr->items[k])) {
        struct jv* t = hr->items[k];
        hr->items[k] = cr->items[k];
        cr->items[k] = t;
      }
    }
  }
  /* Ranks that no file holds, but that a survivor saw die. */
  for (int j = 0; j < dst->n; j++) {
    struct jv* hr = json_get(dst->items[j], "ranks");
    for (int k = 0; hr != NULL && k < hr->n; k++) {
      const struct jv* dead = json_get(hr->items[k], "dead");
      for (int d = 0; dead != NULL && dead->t == J_ARR && d < dead->n; d++) {
        const int r = (int)dead->items[d]->num;
        if (r >= 0 && r < hr->n && rank_weight(hr->items[r]) < 2) {
          struct jv* st = json_get(hr->items[r], "state");
          if (st != NULL && st->t == J_STR) {
            free(st->str);
            st->str = strdup("dead");
          }
        }
      }
    }
  }
}

static struct jv* parse_or_say(const char* text, const char* what) {
  const char* err = NULL;
  if (text != NULL && *text == '\0') {
    fprintf(stderr, "tutti-ras: %s answered nothing\n", what);
    return NULL;
  }
  struct jv* v = text != NULL ? json_parse(text, &err) : NULL;
  const char* refused = json_str(v, "refused", NULL);
  if (refused != NULL) {
    fprintf(stderr, "tutti-ras: %s refused: %s\n", what, refused);
    json_free(v);
    return NULL;
  }
  const struct jv* comms = json_get(v, "communicators");
  if (v == NULL || comms == NULL || comms->t != J_ARR) {
    fprintf(stderr, "tutti-ras: %s is not a RAS document%s%.40s\n", what, err ? " near: " : "",
            err ? err : "");
    json_free(v);
    return NULL;
  }
  return v;
}

int main(int argc, char** argv) {
  const char* addr = getenv("NCCL_RAS_ADDR");
  const char* key_file = NULL;
  int as_json = 0, reading = 0, nfiles = 0;
  const char** files = calloc((size_t)argc, sizeof *files);
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(stdout);
      free(files);
      return 0;
    } else if ((strcmp(argv[i], "-a") == 0 || strcmp(argv[i], "--addr") == 0) && i + 1 < argc) {
      addr = argv[++i];
    } else if (strcmp(argv[i], "--key-file") == 0 && i + 1 < argc) {
      key_file = argv[++i];
    } else if (strcmp(argv[i], "--json") == 0) {
      as_json = 1;
    } else if (strcmp(argv[i], "--read") == 0) {
      reading = 1;
    } else if (reading && argv[i][0] != '-') {
      files[nfiles++] = argv[i];
    } else {
      usage(stderr);
      free(files);
      return 2;
    }
  }
  if (reading && nfiles == 0) {
    usage(stderr);
    free(files);
    return 2;
  }
  struct jv* doc = NULL;
  if (!reading) {
    char where[256];
    char* text = ras_ask(addr, key_file, where, sizeof where);
    if (text == NULL) {
      free(files);
      return 1;
    }
    doc = parse_or_say(text, where);
    free(text);
  }
  for (int i = 0; i < nfiles; i++) {
    FILE* f = fopen(files[i], "r");
    if (f == NULL) {
      perror(files[i]);
      continue;
    }
    char* text = slurp_fd(fileno(f), 10.0);
    fclose(f);
    struct jv* one = parse_or_say(text, files[i]);
    free(text);
    if (one == NULL) {
      continue;
    }
    if (doc == NULL) {
      doc = one;
    } else {
      merge(doc, one);
      json_free(one);
    }
  }
  if (doc == NULL) {
    free(files);
    return 1;
  }
  if (nfiles == 1) {
    struct jv* none = json_new(J_OBJ);
    if (none != NULL) {
      merge(doc, none); /* only the dead lists */
    }
    json_free(none);
  }
  struct jv* verdicts = json_new(J_ARR);
  const struct jv* comms = json_get(doc, "communicators");
  for (int i = 0; i < comms->n; i++) {
    ras_verdicts(comms->items[i], verdicts);
  }
  /* Most severe first: dead, stalled, slow, unreachable, fine. */
  for (int i = 1; i < verdicts->n; i++) {
    for (int j = i; j > 0 && json_num(verdicts->items[j - 1], "severity", 9) >
                                 json_num(verdicts->items[j], "severity", 9);
         j--) {
      struct jv* t = verdicts->items[j];
      verdicts->items[j] = verdicts->items[j - 1];
      verdicts->items[j - 1] = t;
    }
  }
  if (as_json) {
    json_add(doc, "verdicts", verdicts);
    json_write(stdout, doc);
    fputc('\n', stdout);
  } else {
    for (int i = 0; i < verdicts->n; i++) {
      printf("%s\n", json_str(verdicts->items[i], "text", ""));
    }
    if (verdicts->n == 0) {
      printf("no communicator\n");
    }
    for (int i = 0; i < comms->n; i++) {
      const struct jv* c = comms->items[i];
      const struct jv* rs = json_get(c, "ranks");
      printf("\ncommunicator %s: %.0f ranks, made by %s\n", json_str(c, "hash", "?"),
             json_num(c, "size", 0), json_str(c, "made", "?"));
      for (int k = 0; rs != NULL && k < rs->n; k++) {
        ras_print_rank(stdout, rs->items[k]);
      }
    }
    json_free(verdicts);
  }
  json_free(doc);
  free(files);
  return 0;
}
