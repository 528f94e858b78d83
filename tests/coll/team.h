/* A test's ranks as threads of this process or as processes ("workers"),
 * each with an inbox through which unique ids arrive out of band, as a job
 * hands them to processes it starts. */
#ifndef TUTTI_TEST_TEAM_H
#define TUTTI_TEST_TEAM_H

#include "nccl.h"

#define TEAM_MAX 8

struct team {
  int threads; /* 1: workers are threads, 0: processes */
  int n;
  int inbox[TEAM_MAX][2];
  int report[2]; /* processes: "passed failed" lines to the parent */
};

typedef void (*team_fn)(struct team* t, int w, long* passed, long* failed);

/* Runs fn on workers 0..n-1 and adds their counts; a process that died
 * without reporting counts as one failure. As processes: call it before
 * this process starts any thread (the parent only forks and waits). */
void team_run(int threads, int n, team_fn fn, long* passed, long* failed);

/* Puts `id` into worker `to`'s inbox. */
void team_send(struct team* t, int to, const ncclUniqueId* id);

/* Takes the next id from worker w's inbox; 0, or -1 when none came within
 * TUTTI_TIMEOUT and 120 s. */
int team_recv(struct team* t, int w, ncclUniqueId* id);

/* A process worker's end without a word to its peers (a rank that dies):
 * its counts reach the parent, then it exits at once. A thread worker only
 * returns 0 (it then leaves its communicators by ncclCommAbort). */
int team_die(struct team* t, long passed, long failed);

#endif
