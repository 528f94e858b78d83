/* ncclCommGetUniqueId and ncclCommGrow, ranks as threads or as processes
 * (team.h; new ranks get the id out of band, through their inbox). Each
 * communicator runs every collective, bit for bit (every_coll.h), after each
 * change to it:
 *   test_grow threads|procs chain     1 -> 2 -> 3 -> 5 ranks, the parent still working after
 *   test_grow threads|procs local     every argument check, NCCL_COMM_ID, the use-once rule
 *   test_grow threads|procs misuse    no id / two ids / sizes that differ / a rank number used
 *                                     twice / a rank joining with ncclCommInitRank: every rank
 *                                     fails, within the timeout, with a sentence
 *   test_grow threads|procs group     one thread growing two non-blocking ranks in a group
 *   test_grow threads|procs revoke    a grow from a revoked communicator
 *   test_grow threads|procs shrink    a rank dies: revoke, shrink 4 -> 3, grow back to 4
 * Prints "N passed, N failed". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "every_coll.h"
#include "nccl.h"
#include "team.h"

#define EXPECT(cond, ...)                                                          \
  do {                                                                             \
    if (cond) {                                                                    \
      (*P)++;                                                                      \
    } else {                                                                       \
      (*F)++;                                                                      \
      fprintf(stderr, "FAIL %s:%d worker %d: %s: ", __FILE__, __LINE__, w, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                \
      fprintf(stderr, "\n");                                                       \
    }                                                                              \
  } while (0)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double timeout_s(void) {
  const char* s = getenv("TUTTI_TIMEOUT");
  return s != NULL ? atof(s) : 300;
}

/* Workers 0..n-1 make a communicator of n ranks, worker 0's id handed out. */
static ncclComm_t make_parent(struct team* t, int w, int n, long* P, long* F) {
  ncclUniqueId id;
  if (w == 0) {
    EXPECT(ncclGetUniqueId(&id) == ncclSuccess, "%s", ncclGetLastError(NULL));
    for (int q = 1; q < n; q++) {
      team_send(t, q, &id);
    }
  } else if (team_recv(t, w, &id) != 0) {
    (*F)++;
    return NULL;
  }
  ncclComm_t c = NULL;
  ncclResult_t res = ncclCommInitRank(&c, n, id, w);
  EXPECT(res == ncclSuccess, "init of %d ranks: %s", n, ncclGetLastError(NULL));
  return res == ncclSuccess ? c : NULL;
}

/* The size and this rank's number, as the grow promised them. */
static void expect_shape(ncclComm_t g, int w, int n, int rank, long* P, long* F) {
  int gn = -1, gr = -1;
  ncclCommCount(g, &gn);
  ncclCommUserRank(g, &gr);
  EXPECT(gn == n && gr == rank, "grown communicator: rank %d of %d, expected %d of %d", gr, gn,
         rank, n);
}

/* Polls a non-blocking communicator until it is ready (or failed). */
static ncclResult_t wait_ready(ncclComm_t c) {
  ncclResult_t state = ncclInProgress;
  const double end = now() + timeout_s() + 10;
  while (state == ncclInProgress && now() < end) {
    if (ncclCommGetAsyncError(c, &state) != ncclSuccess) {
      return ncclInvalidArgument;
    }
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  return state;
}

/* 1 -> 2 -> 3 -> 5: worker w is rank w of every communicator it is in. At
 * each step another existing rank makes the id; the parent runs every
 * collective again after its child did. */
static void chain(struct team* t, int w, long* P, long* F) {
  static const int sizes[] = {1, 2, 3, 5};
  ncclComm_t comm = w == 0 ? make_parent(t, w, 1, P, F) : NULL;
  if (w == 0 && (comm == NULL || !every_coll(comm, "1 rank", P, F))) {
    return;
  }
  for (int s = 1; s < 4; s++) {
    const int n = sizes[s - 1], m = sizes[s], maker = (s - 1) % n;
    char what[64];
    snprintf(what, sizeof what, "grown %d -> %d", n, m);
    if (w >= m) {
      continue;
    }
    ncclComm_t g = NULL;
    ncclResult_t res;
    if (w < n) {
      ncclUniqueId id, again;
      if (w == maker) {
        EXPECT(ncclCommGetUniqueId(comm, &id) == ncclSuccess, "%s", ncclGetLastError(NULL));
        EXPECT(ncclCommGetUniqueId(comm, &again) == ncclInvalidUsage,
               "a second id before the grow was given");
        for (int q = n; q < m; q++) {
          team_send(t, q, &id);
        }
      }
      /* An existing rank's uniqueId is ignored: here one of zeros. */
      ncclUniqueId zeros;
      memset(&zeros, 0, sizeof zeros);
      res = ncclCommGrow(comm, m, s == 2 ? &zeros : NULL, -1, &g, NULL);
      if (w == maker) {
        /* The grow took the id: the next grow may have one. Its root goes unused. */
        EXPECT(ncclCommGetUniqueId(comm, &again) == ncclSuccess, "%s", ncclGetLastError(NULL));
      }
    } else {
      ncclUniqueId id;
      if (team_recv(t, w, &id) != 0) {
        (*F)++;
        return;
      }
      res = ncclCommGrow(NULL, m, &id, w, &g, NULL);
    }
    EXPECT(res == ncclSuccess && g != NULL, "%s: %s", what, ncclGetLastError(NULL));
    if (res != ncclSuccess) {
      ncclCommDestroy(comm);
      return;
    }
    expect_shape(g, w, m, w, P, F);
    int ok = every_coll(g, what, P, F);
    if (comm != NULL) {
      snprintf(what, sizeof what, "parent of %d after growing to %d", n, m);
      ok = every_coll(comm, what, P, F) && ok;
      EXPECT(ncclCommDestroy(comm) == ncclSuccess, "%s", ncclGetLastError(NULL));
    }
    comm = g;
    if (!ok) {
      break;
    }
  }
  ncclCommDestroy(comm);
}

#define CODE(call, want, text)                                                                     \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    const char* e_ = ncclGetLastError(NULL);                                                       \
    EXPECT(r_ == (want) && strstr(e_, text) != NULL,                                               \
           "%s returned %d (%s), expected %d with \"%s\"", #call, (int)r_, e_, (int)(want), text); \
  } while (0)

/* Every check made before anything is exchanged, NCCL's codes in NCCL's
 * order; NCCL_COMM_ID; the use-once rule; an id used by new ranks only. */
static void local(struct team* t, int w, long* P, long* F) {
  ncclComm_t c = make_parent(t, w, 1, P, F), dead = make_parent(t, w, 1, P, F), g = NULL;
  if (c == NULL || dead == NULL) {
    return;
  }
  ncclCommDestroy(dead);
  ncclUniqueId id, id2, plain;
  ncclGetUniqueId(&plain);
  CODE(ncclCommGetUniqueId(NULL, &id), ncclInvalidArgument, "comm is NULL");
  CODE(ncclCommGetUniqueId(dead, &id), ncclInvalidArgument, "not a live communicator");
  CODE(ncclCommGetUniqueId(c, NULL), ncclInvalidArgument, "uniqueId is NULL");
  setenv("NCCL_COMM_ID", "127.0.0.1:29999", 1);
  CODE(ncclCommGetUniqueId(c, &id), ncclInvalidUsage, "unset NCCL_COMM_ID");
  unsetenv("NCCL_COMM_ID");
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  /* newcomm first, then nRanks, then the size, then the rank. */
  CODE(ncclCommGrow(c, 0, NULL, 5, NULL, NULL), ncclInvalidArgument, "newcomm is NULL");
  g = (ncclComm_t)&g;
  CODE(ncclCommGrow(c, 0, NULL, 5, &g, NULL), ncclInvalidArgument, "nRanks is 0");
  EXPECT(g == NULL, "a failed grow left newcomm set");
  CODE(ncclCommGrow(NULL, -2, &plain, 0, &g, NULL), ncclInvalidArgument, "nRanks is -2");
  CODE(ncclCommGrow(c, 1, NULL, 5, &g, NULL), ncclInvalidArgument, "not larger");
  CODE(ncclCommGrow(dead, 2, NULL, -1, &g, NULL), ncclInvalidArgument, "not a live communicator");
  CODE(ncclCommGrow(c, 2, NULL, 0, &g, NULL), ncclInvalidArgument, "pass -1");
  CODE(ncclCommGrow(c, 2, NULL, -1, &g, &bad), ncclInvalidArgument, "magic");
  CODE(ncclCommGrow(NULL, 2, NULL, 1, &g, NULL), ncclInvalidArgument, "uniqueId is NULL");
  CODE(ncclCommGrow(NULL, 2, &plain, -1, &g, NULL), ncclInvalidArgument, "out of range");
  CODE(ncclCommGrow(NULL, 2, &plain, 2, &g, NULL), ncclInvalidArgument, "out of range");
  CODE(ncclCommGrow(NULL, 2, &plain, 1, &g, &bad), ncclInvalidArgument, "magic");
  ncclUniqueId damaged = plain;
  damaged.internal[0] ^= 0x5a;
  CODE(ncclCommGrow(NULL, 2, &damaged, 1, &g, NULL), ncclInvalidArgument, "bad magic");
  /* A failed check inside a group fails the group. */
  ncclGroupStart();
  CODE(ncclCommGrow(c, 2, NULL, 3, &g, NULL), ncclInvalidArgument, "pass -1");
  EXPECT(ncclGroupEnd() == ncclInvalidArgument, "the group did not fail");
  /* A parent still initializing (a non-blocking one whose peer never comes). */
  ncclConfig_t nb = NCCL_CONFIG_INITIALIZER;
  nb.blocking = 0;
  ncclComm_t early = NULL;
  EXPECT(ncclCommInitRankConfig(&early, 2, plain, 0, &nb) == ncclInProgress, "%s",
         ncclGetLastError(NULL));
  CODE(ncclCommGetUniqueId(early, &id), ncclInvalidArgument, "still initializing");
  CODE(ncclCommGrow(early, 3, NULL, -1, &g, NULL), ncclInvalidArgument, "still initializing");
  EXPECT(ncclCommAbort(early) == ncclSuccess, "%s", ncclGetLastError(NULL));
  /* One id per grow; a failed check does not take it. */
  EXPECT(ncclCommGetUniqueId(c, &id) == ncclSuccess, "%s", ncclGetLastError(NULL));
  CODE(ncclCommGetUniqueId(c, &id2), ncclInvalidUsage, "one id serves exactly one grow");
  CODE(ncclCommGrow(c, 2, NULL, 1, &g, NULL), ncclInvalidArgument, "pass -1");
  CODE(ncclCommGetUniqueId(c, &id2), ncclInvalidUsage, "one id serves exactly one grow");
  /* The id used by a new rank alone (the existing rank never grows). */
  CODE(ncclCommGrow(NULL, 1, &id, 0, &g, NULL), ncclInvalidUsage, "joined as new ranks");
  EXPECT(g == NULL, "a failed grow left newcomm set");
  ncclCommDestroy(c);
}

/* Parent: workers 0 and 1; worker 2 the new rank. Each misuse fails on every
 * rank taking part, with a sentence, in far less than the timeout; then a
 * correct grow of the same parent works, and so does the parent. */
static void misuse(struct team* t, int w, long* P, long* F) {
  ncclComm_t c = w < 2 ? make_parent(t, w, 2, P, F) : NULL, g = NULL;
  ncclUniqueId id, other;
  if (w < 2 && c == NULL) {
    return;
  }
  if (w < 2) {
    CODE(ncclCommGrow(c, 3, NULL, -1, &g, NULL), ncclInvalidUsage, "none of the 2 ranks");
    EXPECT(ncclCommGetUniqueId(c, &other) == ncclSuccess, "%s", ncclGetLastError(NULL));
    CODE(ncclCommGrow(c, 3, NULL, -1, &g, NULL), ncclInvalidUsage, "ranks 0 and 1 of");
    if (w == 0) {
      EXPECT(ncclCommGetUniqueId(c, &other) == ncclSuccess, "%s", ncclGetLastError(NULL));
    }
    CODE(ncclCommGrow(c, 3 + w, NULL, -1, &g, NULL), ncclInvalidUsage, "same nRanks");
  }
  /* Rank 1 given to the new rank too; then the new rank joining with
   * ncclCommInitRank. Rank 1 makes the first id, rank 0 the second. */
  for (int k = 0; k < 2; k++) {
    double t0 = now();
    ncclResult_t res;
    const char* want = k == 0 ? "as rank 1" : "joined with ncclCommInitRank";
    if (w < 2) {
      if (w == 1 - k) {
        EXPECT(ncclCommGetUniqueId(c, &id) == ncclSuccess, "%s", ncclGetLastError(NULL));
        team_send(t, 2, &id);
      }
      res = ncclCommGrow(c, 3, NULL, -1, &g, NULL);
    } else if (team_recv(t, w, &id) != 0) {
      (*F)++;
      return;
    } else {
      res = k == 0 ? ncclCommGrow(NULL, 3, &id, 1, &g, NULL) : ncclCommInitRank(&g, 3, id, 2);
    }
    const char* e = ncclGetLastError(NULL);
    const double dt = now() - t0;
    EXPECT(res == ncclInvalidUsage && strstr(e, want) != NULL && g == NULL,
           "case %d returned %d: %s", k, (int)res, e);
    EXPECT(dt < timeout_s() / 2, "case %d took %.1f s (TUTTI_TIMEOUT %.0f s)", k, dt, timeout_s());
    if (w == 0) {
      printf("misuse %d: failed after %.2f s: %s\n", k, dt, e);
    }
  }
  /* A correct grow: rank 0 makes the id, the new rank takes rank 2. */
  if (w == 0) {
    EXPECT(ncclCommGetUniqueId(c, &id) == ncclSuccess, "%s", ncclGetLastError(NULL));
    team_send(t, 2, &id);
  } else if (w == 2 && team_recv(t, w, &id) != 0) {
    (*F)++;
    return;
  }
  ncclResult_t res = ncclCommGrow(w < 2 ? c : NULL, 3, &id, w < 2 ? -1 : 2, &g, NULL);
  EXPECT(res == ncclSuccess, "%s", ncclGetLastError(NULL));
  if (res == ncclSuccess && every_coll(g, "grown 2 -> 3 after misuse", P, F) && c != NULL) {
    every_coll(c, "parent after misuse and a grow", P, F);
  }
  ncclCommDestroy(g);
  ncclCommDestroy(c);
}

struct side {
  ncclComm_t g, c;
  long p, f;
};

static void* side_main(void* arg) {
  struct side* s = arg;
  if (every_coll(s->g, "grown in a group (second rank)", &s->p, &s->f)) {
    every_coll(s->c, "parent of a group grow (second rank)", &s->p, &s->f);
  }
  return NULL;
}

/* Worker 0 alone holds ranks 0 and 1 of a non-blocking parent and grows
 * both in one group (rank 0 inheriting non-blocking, rank 1 configured
 * blocking); worker 1 is the new rank 2, non-blocking. */
static void group(struct team* t, int w, long* P, long* F) {
  ncclConfig_t nb = NCCL_CONFIG_INITIALIZER, bl = NCCL_CONFIG_INITIALIZER;
  nb.blocking = 0;
  bl.blocking = 1;
  ncclComm_t g[2] = {NULL, NULL};
  ncclUniqueId id;
  if (w == 1) {
    if (team_recv(t, w, &id) != 0) {
      (*F)++;
      return;
    }
    ncclResult_t res = ncclCommGrow(NULL, 3, &id, 2, &g[0], &nb);
    EXPECT(res == ncclInProgress && g[0] != NULL, "non-blocking new rank: %d", (int)res);
    EXPECT(g[0] != NULL && wait_ready(g[0]) == ncclSuccess, "%s", ncclGetLastError(g[0]));
    every_coll(g[0], "grown in a group (new rank)", P, F);
    ncclCommDestroy(g[0]);
    return;
  }
  ncclComm_t c[2] = {NULL, NULL};
  ncclGetUniqueId(&id);
  ncclGroupStart();
  for (int r = 0; r < 2; r++) {
    EXPECT(ncclCommInitRankConfig(&c[r], 2, id, r, &nb) == ncclSuccess, "%s",
           ncclGetLastError(NULL));
  }
  EXPECT(ncclGroupEnd() == ncclInProgress, "a non-blocking init");
  for (int r = 0; r < 2; r++) {
    EXPECT(wait_ready(c[r]) == ncclSuccess, "%s", ncclGetLastError(c[r]));
  }
  EXPECT(ncclCommGetUniqueId(c[1], &id) == ncclSuccess, "%s", ncclGetLastError(NULL));
  team_send(t, 1, &id);
  ncclGroupStart();
  EXPECT(ncclCommGrow(c[0], 3, NULL, -1, &g[0], NULL) == ncclSuccess, "%s", ncclGetLastError(NULL));
  EXPECT(ncclCommGrow(c[1], 3, NULL, -1, &g[1], &bl) == ncclSuccess, "%s", ncclGetLastError(NULL));
  ncclResult_t res = ncclGroupEnd();
  EXPECT(res == ncclInProgress, "the group of a non-blocking grow returned %d: %s", (int)res,
         ncclGetLastError(NULL));
  ncclResult_t state = ncclInProgress;
  EXPECT(g[1] != NULL && ncclCommGetAsyncError(g[1], &state) == ncclSuccess && state == ncclSuccess,
         "the blocking rank's grow was not done at ncclGroupEnd: %d", (int)state);
  EXPECT(g[0] != NULL && wait_ready(g[0]) == ncclSuccess, "%s", ncclGetLastError(g[0]));
  if (g[0] != NULL && g[1] != NULL) {
    expect_shape(g[0], w, 3, 0, P, F);
    expect_shape(g[1], w, 3, 1, P, F);
    struct side s = {g[1], c[1], 0, 0};
    pthread_t th;
    pthread_create(&th, NULL, side_main, &s);
    if (every_coll(g[0], "grown in a group", P, F)) {
      every_coll(c[0], "parent of a group grow", P, F);
    }
    pthread_join(th, NULL);
    *P += s.p;
    *F += s.f;
  }
  for (int r = 0; r < 2; r++) {
    ncclCommDestroy(g[r]);
    ncclCommDestroy(c[r]);
  }
}

/* A revoked communicator (workers 0, 1) grows to 3 with worker 2. */
static void revoke(struct team* t, int w, long* P, long* F) {
  ncclComm_t c = NULL, g = NULL;
  ncclUniqueId id;
  ncclResult_t res;
  if (w < 2) {
    c = make_parent(t, w, 2, P, F);
    if (c == NULL || !every_coll(c, "parent before revoke", P, F)) {
      ncclCommDestroy(c);
      return;
    }
    EXPECT(ncclCommRevoke(c, NCCL_REVOKE_DEFAULT) == ncclSuccess, "%s", ncclGetLastError(NULL));
    int x = 1;
    EXPECT(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, c, NULL) != ncclSuccess,
           "an allreduce on a revoked communicator succeeded");
    if (w == 1) {
      EXPECT(ncclCommGetUniqueId(c, &id) == ncclSuccess, "%s", ncclGetLastError(NULL));
      team_send(t, 2, &id);
    }
    res = ncclCommGrow(c, 3, NULL, -1, &g, NULL);
  } else if (team_recv(t, w, &id) != 0) {
    (*F)++;
    return;
  } else {
    res = ncclCommGrow(NULL, 3, &id, 2, &g, NULL);
  }
  EXPECT(res == ncclSuccess, "grow from a revoked communicator: %s", ncclGetLastError(NULL));
  if (res == ncclSuccess) {
    expect_shape(g, w, 3, w, P, F);
    every_coll(g, "grown from a revoked communicator", P, F);
  }
  ncclCommDestroy(g);
  ncclCommDestroy(c);
}

/* Workers 0..3 make a job of 4; worker 2 dies. The others see it fail,
 * revoke it, shrink it to 3 (NCCL_SHRINK_ABORT) and grow back to 4 with
 * worker 4, which takes rank 3. */
static void shrink(struct team* t, int w, long* P, long* F) {
  ncclComm_t c = NULL, s = NULL, g = NULL;
  ncclUniqueId id;
  ncclResult_t res;
  if (w < 4) {
    c = make_parent(t, w, 4, P, F);
    if (c == NULL || !every_coll(c, "4 ranks", P, F)) {
      ncclCommDestroy(c);
      return;
    }
    if (w == 2) {
      team_die(t, *P, *F); /* a process ends here; a thread leaves by abort */
      ncclCommAbort(c);
      return;
    }
    int x = 1;
    const ncclResult_t lost = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, c, NULL);
    EXPECT(lost != ncclSuccess, "an allreduce with a dead rank succeeded");
    /* A failed parent returns its failure until it is revoked. */
    ncclUniqueId unused;
    EXPECT(ncclCommGetUniqueId(c, &unused) == lost, "%s", ncclGetLastError(NULL));
    EXPECT(ncclCommGrow(c, 5, NULL, -1, &g, NULL) == lost, "%s", ncclGetLastError(NULL));
    EXPECT(ncclCommRevoke(c, NCCL_REVOKE_DEFAULT) == ncclSuccess, "%s", ncclGetLastError(NULL));
    int gone = 2;
    res = ncclCommShrink(c, &gone, 1, &s, NULL, NCCL_SHRINK_ABORT);
    EXPECT(res == ncclSuccess, "shrink: %s", ncclGetLastError(NULL));
    if (res != ncclSuccess) {
      ncclCommAbort(c);
      return;
    }
    expect_shape(s, w, 3, w - (w > 2), P, F);
    every_coll(s, "shrunk 4 -> 3", P, F);
    if (w == 3) {
      EXPECT(ncclCommGetUniqueId(s, &id) == ncclSuccess, "%s", ncclGetLastError(NULL));
      team_send(t, 4, &id);
    }
    res = ncclCommGrow(s, 4, NULL, -1, &g, NULL);
  } else if (team_recv(t, w, &id) != 0) {
    (*F)++;
    return;
  } else {
    res = ncclCommGrow(NULL, 4, &id, 3, &g, NULL);
  }
  EXPECT(res == ncclSuccess, "grow back to 4: %s", ncclGetLastError(NULL));
  if (res == ncclSuccess) {
    expect_shape(g, w, 4, w == 4 ? 3 : w - (w > 2), P, F);
    every_coll(g, "grown back 3 -> 4", P, F);
  }
  if (s != NULL && res == ncclSuccess) {
    every_coll(s, "shrunk communicator after the grow", P, F);
  }
  ncclCommDestroy(g);
  ncclCommDestroy(s);
  ncclCommAbort(c);
}

int main(int argc, char** argv) {
  static const struct {
    const char* name;
    team_fn fn;
    int n;
  } cases[] = {{"chain", chain, 5}, {"local", local, 1},   {"misuse", misuse, 3},
               {"group", group, 2}, {"revoke", revoke, 3}, {"shrink", shrink, 5}};
  if (argc < 3 || (strcmp(argv[1], "threads") != 0 && strcmp(argv[1], "procs") != 0)) {
    fprintf(stderr, "usage: %s threads|procs chain|local|misuse|group|revoke|shrink\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  long passed = 0, failed = 0;
  int found = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (strcmp(argv[2], cases[i].name) == 0) {
      found = 1;
      team_run(strcmp(argv[1], "threads") == 0, cases[i].n, cases[i].fn, &passed, &failed);
    }
  }
  if (!found) {
    fprintf(stderr, "unknown case %s\n", argv[2]);
    return 2;
  }
  printf("%ld passed, %ld failed\n", passed, failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
