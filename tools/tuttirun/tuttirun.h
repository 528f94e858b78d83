/* tuttirun's pieces: the job the command line describes (opts.c), the agent
 * that meets the other nodes and restarts the workers (agent.c, rdzv.c),
 * the supervisor of one attempt's workers (job.c) and the forwarding of
 * their output (output.c). */
#ifndef TUTTIRUN_H
#define TUTTIRUN_H

#include <stddef.h>
#include <sys/types.h>

#define TR_MAX_LOCAL_RANKS 4096
#define TR_DEFAULT_PORT 29500      /* torchrun's --master_port */
#define TR_DEFAULT_RDZV_PORT 29400 /* torchrun's c10d endpoint port */

/* Bits of torchrun's --redirects / --tee values. */
#define TR_STD_OUT 1
#define TR_STD_ERR 2

/* What to run on this node; the command line fills it (opts.c). */
struct tr_job {
  char** argv;   /* what each rank executes, NULL-terminated */
  int nlocal;    /* ranks on this node (--nproc_per_node) */
  int min_nodes; /* --nnodes MIN:MAX (or N:N) */
  int max_nodes;
  int node_rank; /* --node_rank (static rendezvous) */
  int c10d;      /* 1: --rdzv_backend c10d (or --standalone), 0: static */
  char rdzv_host[256];
  int rdzv_port; /* 0 with --standalone: any free port */
  char run_id[256];
  int run_id_given; /* --rdzv_id (or --standalone's) rather than torchrun's "none" */
  char role[64];
  char signals[128]; /* --signals_to_handle, as workers see it (TORCHELASTIC_SIGNALS_TO_HANDLE) */
  char local_addr[256]; /* --local_addr, or "" */
  double join_timeout, last_call_timeout, read_timeout;
  int is_host;               /* rdzv_conf is_host: 1, 0, or -1 (decide by address) */
  char master_addr[256];     /* static: --master_addr */
  int master_port;           /* static: --master_port, -1 = choose */
  char secret[400];          /* TUTTI_JOB_SECRET: given, or "" (c10d: rank 0 draws one) */
  int max_restarts;          /* --max_restarts */
  double monitor_interval;   /* --monitor_interval */
  const char* log_dir;       /* --log_dir: DIR/rank_<r>.stdout|stderr and torchrun's layout */
  char run_dir[4096];        /* <log_dir or temp>/<run_id>_xxxxxxxx: error.json, tee logs */
  int run_dir_temp;          /* run_dir's parent is a temp dir: removed at exit */
  unsigned char* redirects;  /* per local rank, TR_STD_* bits */
  unsigned char* tees;       /* per local rank */
  unsigned char* on_console; /* per local rank: --local_ranks_filter */
  int prefix;                /* 1: "[rank%d]: " before every forwarded line */
  double grace_s;            /* SIGTERM -> SIGKILL delay */
};

/* One attempt's place in the job, from the rendezvous (or the flags). */
struct tr_world {
  int group_rank, group_world_size;
  int base_rank, world_size; /* RANK = base_rank + LOCAL_RANK */
  int restart_count;         /* TORCHELASTIC_RESTART_COUNT */
  char master_addr[256];
  int master_port;
  char comm_id[300]; /* NCCL_COMM_ID: MASTER_ADDR:MASTER_PORT+1 */
  char secret[400];
};

/* opts.c: fills `j` from the command line (and torchrun's PET_* variables);
 * exits 2 with the usage on a mistake, 0 after --help. */
void tr_opts_parse(int argc, char** argv, struct tr_job* j);
void tr_opts_free(struct tr_job* j);
extern const char tr_usage_text[];

/* agent.c: rendezvous, attempts and restarts; returns tuttirun's status. */
int tr_agent_run(struct tr_job* j);

/* job.c: one attempt. Starts the ranks, forwards their output, supervises
 * them until every one (and everything they started) is gone. `poll` (may
 * be NULL) is asked every monitor interval whether the attempt must end
 * for a reason outside this node (nonzero: stop the ranks). */
enum tr_outcome { TR_SUCCEEDED, TR_FAILED, TR_SIGNALLED, TR_INTERRUPTED };
struct tr_attempt {
  enum tr_outcome outcome;
  int status; /* the failed rank's status, or 128+signal */
};
void tr_job_setup(const struct tr_job* j); /* once: signals, subreaper */
void tr_job_attempt(const struct tr_job* j, const struct tr_world* w, int (*poll)(void),
                    struct tr_attempt* out);

struct tr_stream;

/* spawn.c: one rank's process, started in a process group of its own. */
int tr_spawn_rank(const struct tr_job* j, const struct tr_world* w, int local, int devnull,
                  pid_t* pid, struct tr_stream* out, struct tr_stream* err);
/* TORCHELASTIC_ERROR_FILE of a local rank in this attempt. */
void tr_error_file(const struct tr_job* j, int restart_count, int local, char* out, size_t cap);

/* One pipe from a rank (its stdout or its stderr) being forwarded line by line. */
struct tr_stream {
  int fd;     /* read end, non-blocking; -1 once closed */
  int rank;   /* global rank, for the prefix */
  int dest;   /* 1 or 2: tuttirun's stdout or stderr; 0: not to the console */
  int log_fd; /* raw copy (--log_dir rank_<r> file), or -1 */
  int tee_fd; /* raw copy (--tee / --redirects stdout.log|stderr.log), or -1 */
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

/* sysinfo.c */
void tr_fqdn(char* out, size_t cap); /* Python's socket.getfqdn() */
int tr_cpu_count(void);              /* os.cpu_count() */
int tr_gpu_count(void);              /* torch.cuda.device_count(), read from the driver */
int tr_is_local_host(const char* host);
void tr_random_bytes(void* p, size_t n);
void tr_uuid4(char* out, size_t cap);
int tr_mkdtemp(const char* dir, const char* prefix, char* out, size_t cap);
int tr_mkdir_p(const char* dir);

/* rdzv.c: the c10d rendezvous of the agents (see docs/tuttirun.md). */
struct tr_store;
int tr_rdzv_open(const struct tr_job* j);
/* Joins the current round; fills `w`. Group rank 0 calls `host` to serve the
 * workers' store (it fills master_addr/master_port). Returns 0, or -1 (the
 * reason said), or 1 when a stop signal came (*stop_pending set by job.c). */
int tr_rdzv_join(const struct tr_job* j, struct tr_world* w, int (*host)(struct tr_world* w));
int tr_rdzv_poll(void); /* 0: carry on; 1: a new round began; 2: the job was given up */
/* After this node's failure: 1 when the job restarts (a new round), 0 when
 * the restarts are spent (the job is then given up for every node). */
int tr_rdzv_fail(const struct tr_job* j);
/* Leaving: counts this node out; the agent that serves the rendezvous
 * store keeps serving until every node left (or the timeout). */
void tr_rdzv_leave(double timeout_s);
void tr_rdzv_give_up(const char* why); /* tells every node to stop */
int tr_stop_requested(void);           /* job.c: a SIGINT/SIGTERM/SIGHUP arrived */
int tr_stop_signal(void);              /* which one */

#endif
