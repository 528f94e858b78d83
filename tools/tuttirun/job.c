/* The supervisor of one attempt: starts each local rank in a process group
 * of its own, forwards its output, serves the stores between, and ends the
 * attempt when one rank fails, when tuttirun is asked to stop or when the
 * other nodes restart, leaving no process and no zombie behind. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store.h"
#include "tuttirun.h"

/* A rank's group id is its pid: killpg reaches whatever the rank started
 * (unless it left the group on purpose, see signal_orphans), and the ranks
 * are out of the terminal's foreground group, so Ctrl-C reaches tuttirun
 * alone, which turns it into one orderly SIGTERM per rank. */
struct rank {
  pid_t pid;
  int running;    /* not reaped yet */
  int group_gone; /* killpg found nobody left: never signal that id again */
  struct tr_stream out, err;
};

static const struct tr_job* job;
static const struct tr_world* world;
static struct rank* ranks;
static int nrunning;

static volatile sig_atomic_t stop_sig;   /* last SIGINT / SIGTERM / SIGHUP */
static volatile sig_atomic_t stop_count; /* how many of them so far */

static int seen_stops;  /* stop signals handled so far (all attempts) */
static int stopping;    /* SIGTERM sent to everything */
static int killed;      /* SIGKILL sent to everything */
static double kill_at;  /* when stopping turns into killing */
static int exit_status; /* the first cause decides it */
static enum tr_outcome outcome;

static void on_signal(int sig) {
  if (sig != SIGCHLD) { /* SIGCHLD only has to wake ppoll */
    stop_sig = sig;
    stop_count = stop_count + 1;
  }
}

static int is_running_rank(pid_t pid) {
  for (int i = 0; i < job->nlocal; i++) {
    if (ranks[i].running && ranks[i].pid == pid) {
      return 1;
    }
  }
  return 0;
}

/* Orphans already sent SIGTERM: a second one could cut short their cleanup. */
static pid_t* termed;
static size_t ntermed, cap_termed;

static int was_termed(pid_t pid) {
  for (size_t i = 0; i < ntermed; i++) {
    if (termed[i] == pid) {
      return 1;
    }
  }
  if (ntermed == cap_termed) {
    size_t cap = cap_termed == 0 ? 64 : 2 * cap_termed;
    pid_t* t = realloc(termed, cap * sizeof *t);
    if (t == NULL) {
      return 0; /* then it may get a second SIGTERM: no harm worth failing for */
    }
    termed = t;
    cap_termed = cap;
  }
  termed[ntermed++] = pid;
  return 0;
}

/* tuttirun is a child subreaper, so a process whose parent died is
 * re-parented to us even when it left its rank's process group (setsid,
 * daemons): find those in /proc and signal them (sig 0: only count). */
static int signal_orphans(int sig) {
  DIR* d = opendir("/proc");
  if (d == NULL) {
    return 0;
  }
  pid_t me = getpid();
  int count = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (!isdigit((unsigned char)e->d_name[0])) {
      continue;
    }
    char path[300], stat[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      continue;
    }
    ssize_t n = read(fd, stat, sizeof stat - 1);
    close(fd);
    stat[n > 0 ? n : 0] = '\0';
    char* paren = strrchr(stat, ')'); /* the command name may contain anything */
    char state;
    int ppid;
    if (paren == NULL || sscanf(paren + 1, " %c %d", &state, &ppid) != 2 || ppid != me ||
        state == 'Z') {
      continue;
    }
    pid_t pid = (pid_t)atoi(e->d_name);
    if (is_running_rank(pid)) {
      continue;
    }
    count++;
    if (sig != 0 && !(sig == SIGTERM && was_termed(pid))) {
      kill(pid, sig);
    }
  }
  closedir(d);
  return count;
}

/* Signals every rank's process group and every orphan; returns how many
 * groups still had members (sig 0 only counts). */
static int signal_all(int sig) {
  int alive = 0;
  for (int i = 0; i < job->nlocal; i++) {
    struct rank* r = &ranks[i];
    if (r->pid <= 0 || r->group_gone) {
      continue;
    }
    if (killpg(r->pid, sig) == 0 || errno == EPERM) {
      alive++;
    } else if (errno == ESRCH) {
      r->group_gone = 1;
    }
  }
  return alive + signal_orphans(sig);
}

static void begin_stop(void) {
  if (stopping) {
    return;
  }
  stopping = 1;
  kill_at = tr_now() + job->grace_s;
  signal_all(SIGTERM);
}

static void drain(struct rank* r) {
  for (int k = 0; k < 8 && (r->out.fd >= 0 || r->err.fd >= 0); k++) {
    if (r->out.fd >= 0) {
      tr_stream_pump(&r->out, job->prefix);
    }
    if (r->err.fd >= 0) {
      tr_stream_pump(&r->err, job->prefix);
    }
  }
}

static void on_rank_exit(struct rank* r, int status) {
  r->running = 0;
  nrunning--;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (stopping || code == 0) {
    return; /* a consequence of our signals, or success */
  }
  drain(r); /* its last words come before our verdict */
  int local = (int)(r - ranks), rank = world->base_rank + local;
  char others[80] = "", efile[4200];
  struct stat st;
  tr_error_file(job, world->restart_count, local, efile, sizeof efile);
  if (stat(efile, &st) == 0) {
    tr_say("rank %d wrote its error to %s", rank, efile);
  }
  if (nrunning > 0) {
    snprintf(others, sizeof others, "; stopping the %d other running rank%s", nrunning,
             nrunning == 1 ? "" : "s");
  }
  if (WIFEXITED(status)) {
    tr_say("rank %d (pid %d) exited with status %d%s", rank, (int)r->pid, code, others);
  } else {
    tr_say("rank %d (pid %d) was killed by signal %d (%s)%s%s", rank, (int)r->pid, WTERMSIG(status),
           strsignal(WTERMSIG(status)), WCOREDUMP(status) ? " (core dumped)" : "", others);
  }
  exit_status = code;
  outcome = TR_FAILED;
  begin_stop();
}

/* Reaps ranks and orphans alike: nothing stays a zombie. */
static void reap(void) {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (int i = 0; i < job->nlocal; i++) {
      if (ranks[i].running && ranks[i].pid == pid) {
        on_rank_exit(&ranks[i], status);
        break;
      }
    }
  }
}

/* Starts local rank `local`. Returns 0, or the errno of a failed fork/exec. */
static int spawn(int local, int devnull) {
  struct rank* r = &ranks[local];
  pid_t pid = -1;
  int e = tr_spawn_rank(job, world, local, devnull, &pid, &r->out, &r->err);
  if (pid > 0) {
    r->pid = pid;
    r->running = 1;
    nrunning++;
  }
  return e;
}

static const char* signame(int sig) {
  return sig == SIGINT    ? "SIGINT"
         : sig == SIGTERM ? "SIGTERM"
         : sig == SIGHUP  ? "SIGHUP"
                          : "a signal";
}

int tr_stop_requested(void) {
  return stop_count != seen_stops;
}

int tr_stop_signal(void) {
  return stop_sig;
}

static void handle_stop_signals(void) {
  if (stop_count == seen_stops) {
    return;
  }
  int sig = stop_sig;
  seen_stops = stop_count;
  outcome = TR_SIGNALLED; /* no restart after this, whatever else happened */
  if (!stopping) {
    exit_status = 128 + sig;
    tr_say("got %s; sending SIGTERM to the %d running rank%s (SIGKILL after %g s)", signame(sig),
           nrunning, nrunning == 1 ? "" : "s", job->grace_s);
    begin_stop();
  } else if (!killed) {
    tr_say("got %s while stopping; sending SIGKILL", signame(sig));
    killed = 1;
    signal_all(SIGKILL);
  }
}

/* ppoll's timeout: none while all is well, the SIGKILL time while stopping,
 * short polls while we wait for leftovers that send no SIGCHLD our way. */
static int poll_timeout_ms(double t) {
  if (nrunning == 0 || killed) {
    return 20;
  }
  if (stopping) { /* and every 50 ms, for orphans to send SIGTERM to */
    double ms = (kill_at - t) * 1e3 + 1;
    return ms < 0 ? 0 : ms > 50 ? 50 : (int)ms;
  }
  return -1;
}

/* Waits for output, signals and store traffic; forwards and serves. */
static void pump_all(int timeout_ms) {
  static struct pollfd* fds;
  static struct tr_stream** who;
  static size_t cap;
  size_t need = 2 * (size_t)job->nlocal + tr_store_nfds();
  if (need > cap) {
    free(fds);
    free(who);
    cap = 2 * need + 16;
    fds = calloc(cap, sizeof *fds);
    who = calloc(cap, sizeof *who);
    if (fds == NULL || who == NULL) {
      tr_say("out of memory");
      exit(1);
    }
  }
  nfds_t n = 0;
  for (int i = 0; i < job->nlocal; i++) {
    struct tr_stream* s[2] = {&ranks[i].out, &ranks[i].err};
    for (int k = 0; k < 2; k++) {
      if (s[k]->fd >= 0) {
        fds[n] = (struct pollfd){.fd = s[k]->fd, .events = POLLIN};
        who[n++] = s[k];
      }
    }
  }
  nfds_t nstreams = n;
  n += tr_store_pollfds(fds + n, cap - n);
  struct timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  sigset_t none;
  sigemptyset(&none);
  /* The only place our signals are unblocked: no race between a check and the wait. */
  int got = ppoll(fds, n, timeout_ms < 0 ? NULL : &ts, &none);
  for (nfds_t i = 0; got > 0 && i < nstreams; i++) {
    if (fds[i].revents != 0) {
      tr_stream_pump(who[i], job->prefix);
    }
  }
  if (got > 0) {
    tr_store_handle(fds + nstreams, n - nstreams);
  }
}

static int streams_open(void) {
  for (int i = 0; i < job->nlocal; i++) {
    if (ranks[i].out.fd >= 0 || ranks[i].err.fd >= 0) {
      return 1;
    }
  }
  return 0;
}

static void setup_signals(void) {
  sigset_t block;
  sigemptyset(&block);
  int sigs[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal; /* no SA_RESTART: nothing blocks while they are unblocked */
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    sigaddset(&block, sigs[i]);
  }
  sa.sa_mask = block;
  sigprocmask(SIG_BLOCK, &block, NULL);
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    sigaction(sigs[i], &sa, NULL);
  }
  signal(SIGPIPE, SIG_IGN);
}

void tr_job_setup(const struct tr_job* j) {
  job = j;
  setup_signals();
  /* Orphans of the ranks come to us, to be reaped and, at the end, stopped. */
  prctl(PR_SET_CHILD_SUBREAPER, 1);
}

void tr_job_attempt(const struct tr_job* j, const struct tr_world* w, int (*poll)(void),
                    struct tr_attempt* res) {
  job = j;
  world = w;
  stopping = killed = exit_status = nrunning = 0;
  outcome = TR_SUCCEEDED;
  ntermed = 0;
  ranks = calloc((size_t)j->nlocal, sizeof *ranks);
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (ranks == NULL || devnull < 0) {
    tr_say("cannot start: %s", ranks == NULL ? "out of memory" : strerror(errno));
    exit(1);
  }
  for (int i = 0; i < j->nlocal; i++) {
    ranks[i].out.fd = ranks[i].err.fd = -1;
    ranks[i].out.log_fd = ranks[i].err.log_fd = ranks[i].out.tee_fd = ranks[i].err.tee_fd = -1;
  }
  for (int i = 0; i < j->nlocal && !tr_stop_requested(); i++) {
    int e = spawn(i, devnull);
    if (e != 0) {
      tr_say("cannot start rank %d: %s: %s", w->base_rank + i, j->argv[0], strerror(e));
      exit_status = e == ENOENT ? 127 : 126;
      outcome = TR_SIGNALLED; /* the same program would fail again: no restart */
      begin_stop();
      break;
    }
  }
  close(devnull);
  double quiet_since = 0; /* when the last process of the attempt was gone */
  double give_up_at = 0;
  double next_poll = tr_now() + j->monitor_interval;
  for (;;) {
    reap();
    handle_stop_signals();
    double t = tr_now();
    if (poll != NULL && !stopping && t >= next_poll) {
      next_poll = t + j->monitor_interval;
      if (poll() != 0) {
        outcome = TR_INTERRUPTED;
        begin_stop();
      }
    }
    if (stopping && !killed && t < kill_at) {
      signal_orphans(SIGTERM); /* those orphaned since: a rank that ended left them */
    }
    if (stopping && !killed && t >= kill_at) {
      if (nrunning > 0) {
        tr_say("%d rank%s still running %g s after SIGTERM; sending SIGKILL", nrunning,
               nrunning == 1 ? " is" : "s are", j->grace_s);
      }
      killed = 1;
      signal_all(SIGKILL);
    }
    if (killed && give_up_at == 0) {
      give_up_at = t + 10; /* unkillable (D state, other owner): do not hang forever */
    }
    if (nrunning == 0) {
      int left = signal_all(0);
      if (left > 0 && !stopping) {
        begin_stop(); /* the ranks ended: what they left running ends too */
      } else if (left > 0 && killed) {
        signal_all(SIGKILL); /* orphaned by the last SIGKILL, after we looked */
      }
      if (left == 0 && quiet_since == 0) {
        quiet_since = t;
      }
      /* Nobody can write to the pipes any more; a short drain is a safety net. */
      if (left == 0 && (!streams_open() || t > quiet_since + 2)) {
        break;
      }
    }
    if (give_up_at != 0 && t > give_up_at) {
      tr_say("giving up on processes that outlive SIGKILL (uninterruptible sleep?)");
      break;
    }
    int ms = poll_timeout_ms(t);
    if (poll != NULL && !stopping) {
      int until = (int)((next_poll - t) * 1e3) + 1;
      ms = ms < 0 || ms > until ? until : ms;
    }
    pump_all(ms);
  }
  for (int i = 0; i < j->nlocal; i++) {
    tr_stream_close(&ranks[i].out, j->prefix);
    tr_stream_close(&ranks[i].err, j->prefix);
  }
  free(ranks);
  ranks = NULL;
  res->outcome = outcome;
  res->status = exit_status;
}
