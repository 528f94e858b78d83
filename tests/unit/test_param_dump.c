/* ncclParamDumpAll read back (one entry per key, sorted, each field agreeing
 * with the getters, where every value came from), and what ncclParam* hands
 * a thread: its own, valid until its next call of the same function, freed
 * when it ends (ASan's leak check), the same from threads at once. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "nccl.h"

struct entry {
  char key[64], type[16], value[256], source[512], deflt[256], accepts[512], desc[1024];
  int fields;
};

static const char* text_of(const char* key) {
  const char* v = NULL;
  int len = 0;
  ncclResult_t r = ncclParamGetParameter(key, &v, &len);
  CHECK(r == ncclSuccess, "GetParameter(%s): %d", key, (int)r);
  return r == ncclSuccess ? v : "";
}

/* Runs ncclParamDumpAll with stdout in a file; returns what it wrote. */
static char* capture_dump(void) {
  char path[] = "/tmp/tutti-param-dump-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0, "mkstemp");
  fflush(stdout);
  int saved = dup(1);
  dup2(fd, 1);
  ncclParamDumpAll();
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  off_t size = lseek(fd, 0, SEEK_END);
  char* text = calloc((size_t)size + 1, 1);
  CHECK(text != NULL && pread(fd, text, (size_t)size, 0) == size, "reading the dump back");
  close(fd);
  unlink(path);
  return text;
}

static void field(struct entry* e, const char* line) {
  static const struct {
    const char* name;
    size_t off, len;
  } f[] = {
      {"  type: ", offsetof(struct entry, type), sizeof((struct entry*)0)->type},
      {"  value: ", offsetof(struct entry, value), sizeof((struct entry*)0)->value},
      {"  source: ", offsetof(struct entry, source), sizeof((struct entry*)0)->source},
      {"  default: ", offsetof(struct entry, deflt), sizeof((struct entry*)0)->deflt},
      {"  accepts: ", offsetof(struct entry, accepts), sizeof((struct entry*)0)->accepts},
      {"  description: ", offsetof(struct entry, desc), sizeof((struct entry*)0)->desc},
  };
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    if (strncmp(line, f[i].name, strlen(f[i].name)) == 0) {
      snprintf((char*)e + f[i].off, f[i].len, "%s", line + strlen(f[i].name));
      e->fields |= 1 << i;
      return;
    }
  }
  CHECK(0, "a line of no field: \"%s\"", line);
}

/* The dump's entries; the count, or -1 when the header is wrong. */
static int parse_dump(char* text, struct entry* out, int max) {
  int n = -1, header = 0;
  char* save = NULL;
  for (char* line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
    if (!header) {
      int keys = 0;
      header = sscanf(line, "=== tutti parameters: %d keys ===", &keys) == 1;
      CHECK(header, "the header: \"%s\"", line);
      n = 0;
      continue;
    }
    if (line[0] != ' ' && n < max) {
      memset(&out[n], 0, sizeof out[n]);
      snprintf(out[n].key, sizeof out[n].key, "%s", line);
      n++;
    } else if (n > 0) {
      field(&out[n - 1], line);
    }
  }
  return n;
}

static struct entry* find(struct entry* e, int n, const char* key) {
  for (int i = 0; i < n; i++) {
    if (strcmp(e[i].key, key) == 0) {
      return &e[i];
    }
  }
  CHECK(0, "%s is not in the dump", key);
  static struct entry none;
  return &none;
}

static void dump_tests(const char* conf) {
  const char** table = NULL;
  int nkeys = 0;
  CHECK_NCCL(ncclParamGetAllParameterKeys(&table, &nkeys));
  static struct entry e[256];
  char* text = capture_dump();
  int n = parse_dump(text, e, 256);
  free(text);
  CHECK(n == nkeys, "the dump has %d entries, there are %d keys", n, nkeys);
  for (int i = 0; i < n && i < nkeys; i++) {
    CHECK(strcmp(e[i].key, table[i]) == 0, "entry %d is %s, key %s", i, e[i].key, table[i]);
    CHECK(e[i].fields == 63, "%s: fields %#x", e[i].key, e[i].fields);
    CHECK(e[i].accepts[0] != '\0' && e[i].desc[0] != '\0', "%s: no accepts or description",
          e[i].key);
    const char* v = text_of(e[i].key);
    char buf[1024];
    int len = 0;
    ncclParamHandle_t h = NULL;
    CHECK_NCCL(ncclParamBind(&h, e[i].key));
    CHECK_NCCL(ncclParamGet(h, buf, sizeof buf, &len));
    if (strcmp(e[i].type, "string") == 0) {
      char quoted[300];
      snprintf(quoted, sizeof quoted, "\"%s\"", v);
      CHECK(
          strcmp(e[i].value, quoted) == 0 || (strcmp(e[i].value, "(unset)") == 0 && v[0] == '\0' &&
                                              strcmp(e[i].source, "default") == 0),
          "%s: the dump says %s, GetParameter \"%s\"", e[i].key, e[i].value, v);
      CHECK(len == (int)strlen(v) + 1, "%s: %d bytes", e[i].key, len);
    } else {
      CHECK(strcmp(e[i].value, v) == 0, "%s: %s vs %s", e[i].key, e[i].value, v);
      const int int32 = strcmp(e[i].type, "int32") == 0;
      CHECK(int32 || strcmp(e[i].type, "int64") == 0, "%s: type %s", e[i].key, e[i].type);
      CHECK(len == (int32 ? 4 : 8), "%s (%s): %d bytes", e[i].key, e[i].type, len);
      long long lo = 0, hi = 0;
      /* TUTTI_PARAM_INT32's promise: its range lies inside int32. */
      CHECK(!int32 || (sscanf(e[i].accepts, "%lld to %lld", &lo, &hi) == 2 && lo >= INT32_MIN &&
                       hi <= INT32_MAX),
            "%s is int32 but accepts %s", e[i].key, e[i].accepts);
    }
  }
  char file_source[600];
  snprintf(file_source, sizeof file_source, "config file %s", conf);
  static const struct {
    const char *key, *value, *source;
  } want[] = {
      {"TUTTI_SPIN", "3", "environment"},     {"TUTTI_YIELD", "77", NULL},
      {"TUTTI_CMA_DISABLE", "0", "default"},  {"TUTTI_TIMEOUT", "300", "default"},
      {"NCCL_HOSTID", "\"conf-host\"", NULL}, {"NCCL_DEBUG", "(unset)", "default"},
      {"NCCL_NET", "\"\"", "environment"},    {"TUTTI_JOB_SECRET", "\"s3cret\"", "environment"},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    struct entry* x = find(e, n, want[i].key);
    const char* source = want[i].source != NULL ? want[i].source : file_source;
    CHECK(strcmp(x->value, want[i].value) == 0 && strcmp(x->source, source) == 0,
          "%s: value %s source %s; want %s from %s", want[i].key, x->value, x->source,
          want[i].value, source);
  }
  struct entry* t = find(e, n, "TUTTI_TIMEOUT");
  CHECK(strcmp(t->type, "int64") == 0 && strcmp(t->deflt, "300") == 0 &&
            strcmp(t->accepts, "1 or more") == 0,
        "TUTTI_TIMEOUT: %s, default %s, accepts %s", t->type, t->deflt, t->accepts);
  t = find(e, n, "TUTTI_HEARTBEAT_S");
  CHECK(strcmp(t->type, "int32") == 0 && strcmp(t->accepts, "0 to 3600") == 0,
        "TUTTI_HEARTBEAT_S: %s, accepts %s", t->type, t->accepts);
  t = find(e, n, "NCCL_SOCKET_NTHREADS");
  CHECK(strcmp(t->deflt, "-1 (net/socket/comm.c), 1 (transport/tcp.c)") == 0,
        "two readers' defaults: %s", t->deflt);
  t = find(e, n, "NCCL_SHM_DISABLE");
  CHECK(strcmp(t->deflt, "0") == 0 && strcmp(t->accepts, "any integer") == 0,
        "readers that agree: %s, %s", t->deflt, t->accepts);
}

/* ---- What each thread is handed. ---- */

static pthread_barrier_t bar;
static const char *b_str, *b_text, **b_table;

static void* other_thread(void* arg) {
  (void)arg;
  const char** table = NULL;
  int n = 0, len = 0;
  pthread_barrier_wait(&bar); /* the first thread holds its results */
  ncclParamHandle_t h = NULL;
  CHECK_NCCL(ncclParamBind(&h, "NCCL_HOSTID"));
  CHECK_NCCL(ncclParamGetStr(h, &b_str));
  CHECK_NCCL(ncclParamGetParameter("NCCL_SOCKET_NTHREADS", &b_text, &len));
  CHECK_NCCL(ncclParamGetAllParameterKeys(&b_table, &n));
  b_table[0] = "scribbled"; /* its own copy */
  pthread_barrier_wait(&bar);
  pthread_barrier_wait(&bar); /* the first thread has looked */
  CHECK_NCCL(ncclParamGetAllParameterKeys(&table, &n));
  CHECK(strcmp(table[0], "scribbled") != 0, "the table is filled again at each call");
  return NULL;
}

/* Threads reading every key at once agree with one reading alone. Returns
 * the key that disagreed (the harness's counters are the main thread's). */
static void* reader(void* arg) {
  const char** table = NULL;
  int n = 0;
  if (ncclParamGetAllParameterKeys(&table, &n) != ncclSuccess) {
    return "(the key table)";
  }
  char** expect = arg;
  for (int round = 0; round < 50; round++) {
    for (int i = 0; i < n; i++) {
      const char* v = NULL;
      int len = 0;
      ncclParamHandle_t h = NULL;
      if (ncclParamBind(&h, table[i]) != ncclSuccess ||
          ncclParamGetParameter(table[i], &v, &len) != ncclSuccess || strcmp(v, expect[i]) != 0) {
        return (void*)table[i];
      }
    }
  }
  return NULL;
}

static void thread_tests(void) {
  const char *a_str = NULL, *a_text = NULL, **a_table = NULL;
  int n = 0, len = 0;
  ncclParamHandle_t h = NULL;
  CHECK_NCCL(ncclParamBind(&h, "TUTTI_JOB_SECRET"));
  CHECK_NCCL(ncclParamGetStr(h, &a_str));
  CHECK_NCCL(ncclParamGetParameter("TUTTI_SPIN", &a_text, &len));
  CHECK_NCCL(ncclParamGetAllParameterKeys(&a_table, &n));
  const char* first = a_table[0];
  pthread_barrier_init(&bar, NULL, 2);
  pthread_t t;
  pthread_create(&t, NULL, other_thread, NULL);
  pthread_barrier_wait(&bar);
  pthread_barrier_wait(&bar); /* the other thread holds its results */
  CHECK(strcmp(a_str, "s3cret") == 0 && strcmp(a_text, "3") == 0,
        "another thread's calls changed this one's: %s %s", a_str, a_text);
  CHECK(b_str != a_str && strcmp(b_str, "conf-host") == 0, "the other thread's string: %s", b_str);
  CHECK(strcmp(b_text, "-1") == 0, "the other thread's text: %s", b_text);
  CHECK(b_table != a_table && a_table[0] == first, "tables are each thread's own");
  /* GetStr and GetParameter keep separate buffers. */
  CHECK_NCCL(ncclParamGetStr(h, &a_str));
  CHECK(strcmp(a_text, "3") == 0, "GetStr overwrote GetParameter's text: %s", a_text);
  pthread_barrier_wait(&bar);
  pthread_join(t, NULL);
  pthread_barrier_destroy(&bar);
  char* expect[256];
  for (int i = 0; i < n && i < 256; i++) {
    expect[i] = strdup(text_of(a_table[i]));
  }
  pthread_t r[4];
  for (int i = 0; i < 4; i++) {
    pthread_create(&r[i], NULL, reader, expect);
  }
  for (int i = 0; i < 4; i++) {
    void* bad = NULL;
    pthread_join(r[i], &bad);
    CHECK(bad == NULL, "%s read at once from threads differs", bad ? (const char*)bad : "");
  }
  for (int i = 0; i < n && i < 256; i++) {
    free(expect[i]);
  }
}

int main(void) {
  const char** table = NULL;
  int n = 0;
  /* The keys, before any value is read: then only what this test sets. */
  CHECK_NCCL(ncclParamGetAllParameterKeys(&table, &n));
  for (int i = 0; i < n; i++) {
    unsetenv(table[i]);
  }
  char conf[] = "/tmp/tutti-param-conf-XXXXXX";
  int fd = mkstemp(conf);
  const char* lines =
      "TUTTI_YIELD=77\nTUTTI_CMA_DISABLE=abc\nNCCL_HOSTID=conf-host\nNCCL_DEBUG=INFO\n"
      "NCCL_NET=from-file\n";
  CHECK(fd >= 0 && write(fd, lines, strlen(lines)) == (ssize_t)strlen(lines), "config file");
  close(fd);
  setenv("NCCL_CONF_FILE", conf, 1);
  setenv("TUTTI_SPIN", "3", 1);
  setenv("TUTTI_JOB_SECRET", "s3cret", 1);
  setenv("NCCL_NET", "", 1);
  dump_tests(conf);
  thread_tests();
  unlink(conf);
  return test_summary("param_dump");
}
