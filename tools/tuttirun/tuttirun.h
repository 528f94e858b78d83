/* tuttirun's pieces: the job description the command line produces, the
 * process supervisor that runs it, and the per-rank output forwarding. */
#ifndef TUTTIRUN_H
#define TUTTIRUN_H

#include <stddef.h>
#include <sys/types.h>

#define TR_MAX_LOCAL_RANKS 4096

/* What to start on this node; the command line fills it (tuttirun.c). */
struct tr_job {
  char** argv;   /* program and its arguments, NULL-terminated */
  int nlocal;    /* ranks on this node (--nproc_per_node) */
  int nnodes;    /* --nnodes */
  int node_rank; /* --node_rank: global rank = node_rank * nlocal + local rank */
  char master_addr[256];
  int master_port;
  char comm_id[300];   /* NCCL_COMM_ID given to every rank */
  char secret[400];    /* TUTTI_JOB_SECRET given to every rank */
  const char* log_dir; /* NULL: no per-rank files */
  int prefix;          /* 1: "[rank%d]: " before every forwarded line */
  double grace_s;      /* SIGTERM -> SIGKILL delay */
};

/* Starts the ranks, forwards their output, supervises them until every one
 * (and everything they started) is gone. Returns tuttirun's exit status. */
int tr_job_run(const struct tr_job* job);

/* One pipe from a rank (its stdout or its stderr) being forwarded line by line. */
struct tr_stream {
  int fd;     /* read end, non-blocking; -1 once closed */
  int rank;   /* global rank, for the prefix */
  int dest;   /* 1 or 2: tuttirun's stdout or stderr */
  int log_fd; /* raw copy (--log_dir), or -1 */
  char* buf;  /* bytes of the line not yet complete */
  size_t len, cap;
};

/* Reads what is available and forwards every complete line. Returns 1 while
 * the pipe is open, 0 once it reached end of file (the stream is then
 * closed, its last partial line forwarded with a newline). */
int tr_stream_pump(struct tr_stream* s, int prefix);
void tr_stream_close(struct tr_stream* s, int prefix);

/* write(2) until done; gives up quietly on a closed reader (EPIPE) so that
 * `tuttirun ... | head` does not kill the job. */
void tr_write_all(int fd, const char* buf, size_t len);
/* "tuttirun: " + message on stderr, in one write. */
void tr_say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
