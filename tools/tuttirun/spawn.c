/* Starting one rank: its pipes and log files, torchrun's environment, and
 * the exec, with the errno of a failed exec sent back through a pipe. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tuttirun.h"

void tr_error_file(const struct tr_job* j, int restart_count, int local, char* out, size_t cap) {
  snprintf(out, cap, "%s/attempt_%d/%d/error.json", j->run_dir, restart_count, local);
}

static void set_int_env(const char* name, int v) {
  char buf[24];
  snprintf(buf, sizeof buf, "%d", v);
  setenv(name, buf, 1);
}

/* torchrun's worker environment (LocalElasticAgent._start_workers), in the
 * child: tuttirun is single-threaded, so setenv after fork is safe. */
static void set_env(const struct tr_job* j, const struct tr_world* w, int local) {
  char path[4200];
  set_int_env("LOCAL_RANK", local);
  set_int_env("RANK", w->base_rank + local);
  set_int_env("GROUP_RANK", w->group_rank);
  set_int_env("ROLE_RANK", w->base_rank + local); /* one role: as the global rank */
  setenv("ROLE_NAME", j->role, 1);
  set_int_env("LOCAL_WORLD_SIZE", j->nlocal);
  set_int_env("WORLD_SIZE", w->world_size);
  set_int_env("GROUP_WORLD_SIZE", w->group_world_size);
  set_int_env("ROLE_WORLD_SIZE", w->world_size);
  setenv("MASTER_ADDR", w->master_addr, 1);
  set_int_env("MASTER_PORT", w->master_port);
  set_int_env("TORCHELASTIC_RESTART_COUNT", w->restart_count);
  set_int_env("TORCHELASTIC_MAX_RESTARTS", j->max_restarts);
  setenv("TORCHELASTIC_RUN_ID", j->run_id, 1);
  /* tuttirun serves the store at MASTER_ADDR:MASTER_PORT, as torchrun's agent. */
  setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  /* torchrun 2.x tells its workers which signals its agent handles. */
  setenv("TORCHELASTIC_SIGNALS_TO_HANDLE",
         j->signals[0] ? j->signals : "SIGTERM,SIGINT,SIGHUP,SIGQUIT", 1);
  setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1", 0);
  tr_error_file(j, w->restart_count, local, path, sizeof path);
  setenv("TORCHELASTIC_ERROR_FILE", path, 1);
  setenv("NCCL_COMM_ID", w->comm_id, 1);
  setenv("TUTTI_JOB_SECRET", w->secret, 1);
  setenv("TUTTI_LAUNCHER", "tuttirun", 1);
}

static void __attribute__((noreturn))
child_exec(const struct tr_job* j, const struct tr_world* w, int local, int devnull, int out_w,
           int err_w, int ex_w, pid_t parent) {
  setpgid(0, 0);
  /* If tuttirun dies without cleaning up (SIGKILL), its ranks must not run on. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) {
    _exit(1);
  }
  int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    signal(sigs[i], SIG_DFL); /* an ignored signal would stay ignored across exec */
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  /* Ranks are not in the foreground group: reading the terminal would stop them. */
  dup2(devnull, 0);
  dup2(out_w, 1);
  dup2(err_w, 2);
  set_env(j, w, local);
  execvp(j->argv[0], j->argv);
  int e = errno;
  ssize_t wr = write(ex_w, &e, sizeof e);
  (void)wr;
  _exit(127);
}

static int open_file(const char* path, int append, int rank, const char* what) {
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
  if (fd < 0) {
    tr_say("cannot write %s: %s (rank %d's %s goes to the terminal only)", path, strerror(errno),
           rank, what);
  }
  return fd;
}

/* The streams' destinations: the terminal unless redirected or filtered
 * out; DIR/rank_<r>.* with --log_dir (all attempts, appended); torchrun's
 * attempt_<k>/<local_rank>/stdout.log with --tee or --redirects. */
static void open_outputs(const struct tr_job* j, const struct tr_world* w, int local,
                         struct tr_stream* s, int bit, const char* what) {
  int rank = w->base_rank + local;
  char path[4300];
  s->dest = (j->redirects[local] & bit) || !j->on_console[local] ? 0 : bit;
  if (j->log_dir != NULL) {
    snprintf(path, sizeof path, "%s/rank_%d.%s", j->log_dir, rank, what);
    s->log_fd = open_file(path, w->restart_count > 0, rank, what);
  }
  if ((j->redirects[local] | j->tees[local]) & bit) {
    snprintf(path, sizeof path, "%s/attempt_%d/%d/%s.log", j->run_dir, w->restart_count, local,
             what);
    s->tee_fd = open_file(path, 0, rank, what);
  }
}

int tr_spawn_rank(const struct tr_job* j, const struct tr_world* w, int local, int devnull,
                  pid_t* pid_out, struct tr_stream* so, struct tr_stream* se) {
  int rank = w->base_rank + local;
  char dir[4300];
  snprintf(dir, sizeof dir, "%s/attempt_%d/%d", j->run_dir, w->restart_count, local);
  if (tr_mkdir_p(dir) != 0) {
    return errno;
  }
  unlink(strcat(dir, "/error.json")); /* torchrun starts each attempt with a fresh folder */
  int out[2], err[2], ex[2];
  /* O_CLOEXEC everywhere: a rank must not hold another rank's pipes open. */
  if (pipe2(out, O_CLOEXEC) != 0) {
    return errno;
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    int e = errno;
    close(out[0]), close(out[1]);
    return e;
  }
  if (pipe2(ex, O_CLOEXEC) != 0) {
    int e = errno;
    close(out[0]), close(out[1]), close(err[0]), close(err[1]);
    return e;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    child_exec(j, w, local, devnull, out[1], err[1], ex[1], parent);
  }
  int e = pid < 0 ? errno : 0;
  close(out[1]), close(err[1]), close(ex[1]);
  *pid_out = pid;
  if (pid > 0) {
    setpgid(pid, pid); /* also here, so that killpg works before the child ran */
    ssize_t n;
    while ((n = read(ex[0], &e, sizeof e)) < 0 && errno == EINTR) {
    }
    if (n != (ssize_t)sizeof e) {
      e = 0; /* end of file: exec succeeded and closed the pipe */
    }
  }
  close(ex[0]);
  if (pid < 0) {
    close(out[0]), close(err[0]);
    return e;
  }
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  *so = (struct tr_stream){.fd = out[0], .rank = rank, .log_fd = -1, .tee_fd = -1};
  *se = (struct tr_stream){.fd = err[0], .rank = rank, .log_fd = -1, .tee_fd = -1};
  open_outputs(j, w, local, so, TR_STD_OUT, "stdout");
  open_outputs(j, w, local, se, TR_STD_ERR, "stderr");
  return e;
}
