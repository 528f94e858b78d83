/* Logging: NCCL_DEBUG / NCCL_DEBUG_SUBSYS parsing, NCCL_DEBUG_FILE naming,
 * the line prefix, and whole runs in child processes (each reads its own
 * environment once) whose log files are read back. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "nccl.h"
#include "util/log.h"

static void test_levels(void) {
  CHECK(tutti_log_parse_level(NULL) == TUTTI_LOG_NONE, "NULL is off");
  CHECK(tutti_log_parse_level("") == TUTTI_LOG_NONE, "empty is off");
  CHECK(tutti_log_parse_level("VERSION") == TUTTI_LOG_VERSION, "VERSION");
  CHECK(tutti_log_parse_level("warn") == TUTTI_LOG_WARN, "warn");
  CHECK(tutti_log_parse_level("Info") == TUTTI_LOG_INFO, "Info");
  CHECK(tutti_log_parse_level("ABORT") == TUTTI_LOG_ABORT, "ABORT");
  CHECK(tutti_log_parse_level("TRACE") == TUTTI_LOG_TRACE, "TRACE");
  CHECK(tutti_log_parse_level("NONE") == TUTTI_LOG_NONE, "NONE");
  CHECK(tutti_log_parse_level("verbose") == -1, "unknown");
  CHECK(tutti_log_parse_level("INFO ") == -1, "trailing junk");
}

static void test_subsys(void) {
  char bad[32];
  const unsigned long def = TUTTI_INIT | TUTTI_BOOTSTRAP | TUTTI_ENV;
  CHECK(tutti_log_parse_subsys(NULL, bad, sizeof bad) == def && bad[0] == '\0', "default");
  CHECK(tutti_log_parse_subsys("INIT,NET", bad, sizeof bad) == (TUTTI_INIT | TUTTI_NET),
        "INIT,NET");
  CHECK(tutti_log_parse_subsys(" init , Net ,", bad, sizeof bad) == (TUTTI_INIT | TUTTI_NET) &&
            bad[0] == '\0',
        "spaces, case and an empty item");
  CHECK(tutti_log_parse_subsys("^COLL", bad, sizeof bad) == ~(unsigned long)TUTTI_COLL,
        "^COLL excludes COLL only");
  CHECK(tutti_log_parse_subsys("^COLL,P2P", bad, sizeof bad) ==
            ~(unsigned long)(TUTTI_COLL | TUTTI_P2P),
        "^ applies to the whole list");
  CHECK(tutti_log_parse_subsys("ALL", bad, sizeof bad) == ~0ul, "ALL");
  CHECK(tutti_log_parse_subsys("^ALL", bad, sizeof bad) == 0, "^ALL");
  CHECK(tutti_log_parse_subsys("", bad, sizeof bad) == 0, "empty: nothing");
  CHECK(tutti_log_parse_subsys("NVLS,REG,PROFILE,RAS", bad, sizeof bad) ==
            (TUTTI_NVLS | TUTTI_REG | TUTTI_PROFILE | TUTTI_RAS),
        "the newer subsystems");
  CHECK(tutti_log_parse_subsys("GRAPH,TUNING,ALLOC,CALL,PROXY,SHM", bad, sizeof bad) ==
            (TUTTI_GRAPH | TUTTI_TUNING | TUTTI_ALLOC | TUTTI_CALL | TUTTI_PROXY | TUTTI_SHM),
        "the rest");
  unsigned long m = tutti_log_parse_subsys("INIT,BOGUS,NOPE", bad, sizeof bad);
  CHECK(m == TUTTI_INIT && strcmp(bad, "BOGUS") == 0, "unknown names: %lx '%s'", m, bad);
  CHECK(tutti_log_parse_subsys("INITX", bad, sizeof bad) == 0 && strcmp(bad, "INITX") == 0,
        "no prefix matches");
  CHECK(tutti_log_parse_subsys("INIT,NET", NULL, 0) == (TUTTI_INIT | TUTTI_NET), "no out");
  /* NCCL's bit values, so that masks copied from NCCL docs mean the same. */
  CHECK(TUTTI_NVLS == 0x800 && TUTTI_BOOTSTRAP == 0x1000 && TUTTI_RAS == 0x8000, "bit values");
}

static void test_file_names(void) {
  char out[64];
  size_t n = tutti_log_file_name("/tmp/nccl.%h.%p.log", "node7", 4242, out, sizeof out);
  CHECK(strcmp(out, "/tmp/nccl.node7.4242.log") == 0 && n == strlen(out), "%%h %%p: %s", out);
  tutti_log_file_name("plain", "h", 1, out, sizeof out);
  CHECK(strcmp(out, "plain") == 0, "plain: %s", out);
  tutti_log_file_name("a%%h%x%", "h", 1, out, sizeof out);
  CHECK(strcmp(out, "a%h%x%") == 0, "%%%% and unknown sequences: %s", out);
  tutti_log_file_name("%p%p-%h%h", "ab", 12, out, sizeof out);
  CHECK(strcmp(out, "1212-abab") == 0, "repeated: %s", out);
  n = tutti_log_file_name("/very/long/%h/%p", "a-rather-long-host-name", 123456, out, 16);
  CHECK(n == strlen("/very/long/a-rather-long-host-name/123456") && strlen(out) == 15,
        "truncated: %zu '%s'", n, out);
  n = tutti_log_file_name("x%p", "h", 7, NULL, 0);
  CHECK(n == 2, "length only: %zu", n);
}

static void test_prefix(void) {
  char buf[256];
  tutti_log_prefix(buf, sizeof buf, TUTTI_LOG_INFO, "node1", 12, 34, -1, "x.c", 1, 0);
  CHECK(strcmp(buf, "node1:12:34 [-1] NCCL INFO ") == 0, "info: '%s'", buf);
  tutti_log_prefix(buf, sizeof buf, TUTTI_LOG_WARN, "node1", 12, 34, 3,
                   "/home/u/tutti/src/transport/tcp.c", 99, 0);
  CHECK(strcmp(buf, "node1:12:34 [3] transport/tcp.c:99 NCCL WARN ") == 0, "warn: '%s'", buf);
  tutti_log_prefix(buf, sizeof buf, TUTTI_LOG_TRACE, "n", 1, 2, 0, "src/api/coll.c", 7, 1.5);
  CHECK(strcmp(buf, "n:1:2 [0] 1.500000 api/coll.c:7 NCCL TRACE ") == 0, "trace: '%s'", buf);
  tutti_log_prefix(buf, sizeof buf, TUTTI_LOG_WARN, "n", 1, 2, 0, "/x/mysrc/y.c", 7, 0);
  CHECK(strstr(buf, " y.c:7 NCCL WARN") != NULL, "outside src/, the file name: '%s'", buf);
}

/* A child with `env` (NAME=VALUE;...) set that logs a few lines; returns
 * what it wrote to NCCL_DEBUG_FILE (a pattern under dir) and its stderr. */
struct run {
  char log[8192];
  char err[2048];
  int pid;
};

static void* thread_logs(void* p) {
  (void)p;
  tutti_log_set_device(5);
  INFO(TUTTI_COLL, "from a thread of device five");
  return NULL;
}

static void slurp(const char* path, char* out, size_t len) {
  out[0] = '\0';
  FILE* f = fopen(path, "r");
  if (f != NULL) {
    size_t n = fread(out, 1, len - 1, f);
    out[n] = '\0';
    fclose(f);
  }
}

static void run_child(const char* dir, const char* env, struct run* r) {
  char err_path[512];
  snprintf(err_path, sizeof err_path, "%s/stderr", dir);
  pid_t pid = fork();
  if (pid == 0) {
    if (freopen(err_path, "w", stderr) == NULL) {
      _exit(3);
    }
    unsetenv("NCCL_DEBUG");
    unsetenv("NCCL_DEBUG_SUBSYS");
    unsetenv("NCCL_DEBUG_FILE");
    char buf[512];
    snprintf(buf, sizeof buf, "%s", env);
    for (char *save = NULL, *kv = strtok_r(buf, ";", &save); kv != NULL;
         kv = strtok_r(NULL, ";", &save)) {
      char* eq = strchr(kv, '=');
      *eq = '\0';
      setenv(kv, eq + 1, 1);
    }
    tutti_log_init();
    tutti_log_init();
    INFO(TUTTI_INIT, "init line %d", 1);
    INFO(TUTTI_NET, "net line");
    INFO(TUTTI_COLL | TUTTI_NET, "coll or net line");
    TRACE(TUTTI_COLL, "trace line");
    WARN("warn line %s", "here");
    pthread_t t;
    pthread_create(&t, NULL, thread_logs, NULL);
    pthread_join(t, NULL);
    fflush(NULL);
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child for '%s' exited %d", env, st);
  char path[512];
  snprintf(path, sizeof path, "%s/log.%s.%d", dir, tutti_hostname(), (int)pid);
  slurp(path, r->log, sizeof r->log);
  slurp(err_path, r->err, sizeof r->err);
  unlink(path);
  r->pid = pid;
}

static int count(const char* hay, const char* needle) {
  int n = 0;
  for (const char* p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle)) {
    n++;
  }
  return n;
}

static void test_runs(void) {
  char dir[] = "/tmp/tutti-test-log-XXXXXX";
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  char env[512];
  struct run r;
  const char* file = "NCCL_DEBUG_FILE=%s/log.%%h.%%p";
  char base[256];
  snprintf(base, sizeof base, file, dir);

  snprintf(env, sizeof env, "%s;NCCL_DEBUG=INFO", base);
  run_child(dir, env, &r);
  char want[256];
  snprintf(want, sizeof want, "NCCL version %d.%d.%d (tutti %s)\n", NCCL_MAJOR, NCCL_MINOR,
           NCCL_PATCH, TUTTI_VERSION_STRING);
  CHECK(strncmp(r.log, want, strlen(want)) == 0, "the version comes first: %s", r.log);
  snprintf(want, sizeof want, "%s:%d:%d [-1] NCCL INFO init line 1\n", tutti_hostname(), r.pid,
           r.pid);
  CHECK(strstr(r.log, want) != NULL, "INFO line with NCCL's prefix (%s): %s", want, r.log);
  CHECK(strstr(r.log, "net line") == NULL && strstr(r.log, "trace line") == NULL &&
            strstr(r.log, "device five") == NULL,
        "default subsystems are INIT,BOOTSTRAP,ENV: %s", r.log);
  snprintf(want, sizeof want, "%s:%d:%d [-1] test_log.c:", tutti_hostname(), r.pid, r.pid);
  CHECK(strstr(r.log, want) != NULL && strstr(r.log, " NCCL WARN warn line here\n") != NULL,
        "WARN line with file and line: %s", r.log);

  snprintf(env, sizeof env, "%s;NCCL_DEBUG=info;NCCL_DEBUG_SUBSYS=NET,COLL", base);
  run_child(dir, env, &r);
  CHECK(strstr(r.log, "init line") == NULL && strstr(r.log, "NCCL INFO net line\n") &&
            strstr(r.log, "coll or net line") && strstr(r.log, "[5] NCCL INFO from a thread"),
        "NET,COLL, and a thread's device: %s", r.log);

  snprintf(env, sizeof env, "%s;NCCL_DEBUG=INFO;NCCL_DEBUG_SUBSYS=^INIT,COLL", base);
  run_child(dir, env, &r);
  CHECK(strstr(r.log, "init line") == NULL && strstr(r.log, "NCCL INFO net line\n") &&
            strstr(r.log, "coll or net line") && !strstr(r.log, "device five"),
        "^INIT,COLL: %s", r.log);

  snprintf(env, sizeof env, "%s;NCCL_DEBUG=TRACE;NCCL_DEBUG_SUBSYS=ALL", base);
  run_child(dir, env, &r);
  CHECK(strstr(r.log, "init line") && strstr(r.log, "net line") && strstr(r.log, " test_log.c:") &&
            strstr(r.log, " NCCL TRACE trace line\n"),
        "TRACE: INFO lines and trace lines: %s", r.log);

  snprintf(env, sizeof env, "%s;NCCL_DEBUG=VERSION", base);
  run_child(dir, env, &r);
  snprintf(want, sizeof want, "NCCL version %d.%d.%d (tutti %s)\n", NCCL_MAJOR, NCCL_MINOR,
           NCCL_PATCH, TUTTI_VERSION_STRING);
  CHECK(strcmp(r.log, want) == 0, "VERSION: the version once, nothing else: '%s'", r.log);

  snprintf(env, sizeof env, "%s;NCCL_DEBUG=WARN", base);
  run_child(dir, env, &r);
  CHECK(count(r.log, "\n") == 2 && count(r.log, "NCCL WARN warn line here") == 1,
        "WARN: version and warnings only: '%s'", r.log);

  snprintf(env, sizeof env, "%s;NCCL_DEBUG=INFO;NCCL_DEBUG_SUBSYS=INIT,BOGUS", base);
  run_child(dir, env, &r);
  CHECK(strstr(r.log, "NCCL WARN NCCL_DEBUG_SUBSYS=\"INIT,BOGUS\": \"BOGUS\" is not a subsystem") &&
            strstr(r.log, "init line"),
        "an unknown subsystem is named: %s", r.log);

  snprintf(env, sizeof env, "%s;NCCL_DEBUG=LOUD", base);
  run_child(dir, env, &r);
  CHECK(r.log[0] == '\0' && strstr(r.err, "NCCL_DEBUG=\"LOUD\" is not one of"),
        "an unknown level is reported on stderr: '%s' '%s'", r.log, r.err);

  snprintf(env, sizeof env, "NCCL_DEBUG_FILE=%s/no/such/dir/x.%%p;NCCL_DEBUG=WARN", dir);
  run_child(dir, env, &r);
  CHECK(strstr(r.err, "cannot open NCCL_DEBUG_FILE") != NULL, "unopenable file: '%s'", r.err);

  char path[512];
  snprintf(path, sizeof path, "%s/stderr", dir);
  unlink(path);
  CHECK(rmdir(dir) == 0, "no files left in %s", dir);
}

int main(void) {
  test_levels();
  test_subsys();
  test_file_names();
  test_prefix();
  test_runs();
  return test_summary("log");
}
