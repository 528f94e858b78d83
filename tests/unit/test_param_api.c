/* NCCL 2.30's parameter API (ncclParam*) against the shared library: the key
 * table equals what the sources declare, every error path, integers fitted
 * to each getter's type at the edges (one child process per value: integers
 * are cached at their first read), values from the environment, a config
 * file (NCCL_CONF_FILE) and defaults. ncclParamDumpAll and thread-local
 * results: test_param_dump.c. */
#define _GNU_SOURCE /* nftw */
#include <ftw.h>
#include <pthread.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "nccl.h"

#define MAX_KEYS 256

/* ---- The keys the sources declare (TUTTI_PARAM* of a literal name). ---- */

static char* declared[MAX_KEYS];
static int ndeclared;
static regex_t decl_re;

static int declared_has(const char* key) {
  for (int i = 0; i < ndeclared; i++) {
    if (strcmp(declared[i], key) == 0) {
      return 1;
    }
  }
  return 0;
}

static int scan_file(const char* path, const struct stat* st, int type, struct FTW* ftw) {
  (void)st;
  (void)ftw;
  const char* dot = strrchr(path, '.');
  int cuda = dot != NULL && (strcmp(dot, ".cu") == 0 || strcmp(dot, ".cuh") == 0);
  int c = dot != NULL && (strcmp(dot, ".c") == 0 || strcmp(dot, ".h") == 0);
  /* What the library compiles: the device executor with CUDA, none.c without. */
  int device = strstr(path, "/src/device/") != NULL;
  int none = strstr(path, "/src/device/none.c") != NULL;
  if (type != FTW_F || !(cuda || c) || (cuda && !TUTTI_HAVE_CUDA) ||
      (device && !TUTTI_HAVE_CUDA && !none) || (none && TUTTI_HAVE_CUDA)) {
    return 0;
  }
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    return 0;
  }
  static char text[1 << 20];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  regmatch_t m[2];
  for (const char* p = text; regexec(&decl_re, p, 2, m, 0) == 0; p += m[0].rm_eo) {
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)(m[1].rm_eo - m[1].rm_so), p + m[1].rm_so);
    if (!declared_has(key) && ndeclared < MAX_KEYS) {
      declared[ndeclared++] = strdup(key);
    }
  }
  return 0;
}

static void scan_sources(void) {
  CHECK(regcomp(&decl_re,
                "TUTTI_PARAM[A-Z0-9_]*[[:space:]]*\\([[:space:]]*[A-Za-z0-9_]+[[:space:]]*,"
                "[[:space:]]*\"((NCCL|TUTTI)_[A-Z0-9_]+)\"",
                REG_EXTENDED) == 0,
        "regcomp");
  CHECK(nftw(TUTTI_SOURCE_DIR "/src", scan_file, 16, FTW_PHYS) == 0, "walking %s/src",
        TUTTI_SOURCE_DIR);
  regfree(&decl_re);
  CHECK(ndeclared >= 30, "only %d declarations found in the sources", ndeclared);
}

/* ---- Helpers. ---- */

static ncclParamHandle_t bind(const char* key) {
  ncclParamHandle_t h = NULL;
  CHECK_NCCL(ncclParamBind(&h, key));
  return h;
}

static const char* param_text(const char* key) {
  const char* v = NULL;
  int len = -1;
  ncclResult_t r = ncclParamGetParameter(key, &v, &len);
  CHECK(r == ncclSuccess && v != NULL && len == (int)strlen(v), "GetParameter(%s): %d", key,
        (int)r);
  return r == ncclSuccess ? v : "";
}

static int64_t param_i64(const char* key) {
  int64_t v = INT64_MIN + 7;
  CHECK_NCCL(ncclParamGetI64(bind(key), &v));
  return v;
}

/* ---- Integers fitted to each getter, one value per child process. ---- */

enum { I8 = 1, I16 = 2, I32 = 4, I64 = 8, U8 = 16, U16 = 32, U32 = 64, U64 = 128 };

static const struct {
  const char* text;
  int64_t value;
  int fits;
} edges[] = {
    {"0", 0, 255},
    {"127", 127, 255},
    {"128", 128, 254},
    {"0x80", 128, 254},
    {"-1", -1, I8 | I16 | I32 | I64},
    {"-128", -128, I8 | I16 | I32 | I64},
    {"-129", -129, I16 | I32 | I64},
    {"255", 255, 254},
    {"256", 256, I16 | I32 | I64 | U16 | U32 | U64},
    {"32767", 32767, I16 | I32 | I64 | U16 | U32 | U64},
    {"32768", 32768, I32 | I64 | U16 | U32 | U64},
    {"-32768", -32768, I16 | I32 | I64},
    {"-32769", -32769, I32 | I64},
    {"65535", 65535, I32 | I64 | U16 | U32 | U64},
    {"65536", 65536, I32 | I64 | U32 | U64},
    {"2147483647", 2147483647, I32 | I64 | U32 | U64},
    {"2147483648", 2147483648LL, I64 | U32 | U64},
    {"-2147483648", -2147483647LL - 1, I32 | I64},
    {"-2147483649", -2147483649LL, I64},
    {"4294967295", 4294967295LL, I64 | U32 | U64},
    {"4294967296", 4294967296LL, I64 | U64},
    {"9223372036854775807", INT64_MAX, I64 | U64},
    {"-9223372036854775808", INT64_MIN, I64},
};

/* A getter either gives the value exactly or fails and leaves *out alone. */
#define TRY(Name, T, bit)                                                                 \
  do {                                                                                    \
    T out = (T)0x5a;                                                                      \
    ncclResult_t r = ncclParamGet##Name(h, &out);                                         \
    int ok = (fits & (bit)) ? r == ncclSuccess && out == (T)value                         \
                            : r == ncclInvalidArgument && out == (T)0x5a;                 \
    if (!ok) {                                                                            \
      fprintf(stderr, "FAIL edge %s: ncclParamGet%s returned %d\n", text, #Name, (int)r); \
      bad++;                                                                              \
    }                                                                                     \
  } while (0)

static int edge_child(const char* text, int64_t value, int fits) {
  int bad = 0;
  setenv("NCCL_BUFFSIZE", text, 1);
  ncclParamHandle_t h = NULL;
  if (ncclParamBind(&h, "NCCL_BUFFSIZE") != ncclSuccess) {
    return 1;
  }
  TRY(I8, int8_t, I8);
  TRY(I16, int16_t, I16);
  TRY(I32, int32_t, I32);
  TRY(I64, int64_t, I64);
  TRY(U8, uint8_t, U8);
  TRY(U16, uint16_t, U16);
  TRY(U32, uint32_t, U32);
  TRY(U64, uint64_t, U64);
  return bad;
}

static void edge_tests(void) {
  for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      _exit(edge_child(edges[i].text, edges[i].value, edges[i].fits) == 0 ? 0 : 1);
    }
    int status = 0;
    CHECK(
        pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "NCCL_BUFFSIZE=%s: the getters did not fit it as expected", edges[i].text);
  }
}

/* ---- The key table, and every key found by Bind and GetParameter. ---- */

static void key_tests(void) {
  const char** table = NULL;
  int n = -1;
  CHECK_NCCL(ncclParamGetAllParameterKeys(&table, &n));
  CHECK(n == ndeclared, "%d keys, the sources declare %d", n, ndeclared);
  for (int i = 0; i < n; i++) {
    CHECK(declared_has(table[i]), "key %s is declared nowhere in the sources", table[i]);
    CHECK(i == 0 || strcmp(table[i - 1], table[i]) < 0, "keys not sorted at %s", table[i]);
    ncclParamHandle_t h = NULL;
    CHECK(ncclParamBind(&h, table[i]) == ncclSuccess && h != NULL, "Bind(%s)", table[i]);
    param_text(table[i]);
  }
  for (int i = 0; i < ndeclared; i++) {
    int found = 0;
    for (int j = 0; j < n; j++) {
      found |= strcmp(table[j], declared[i]) == 0;
    }
    CHECK(found, "%s is declared but not a key", declared[i]);
  }
}

/* ---- Every error path. ---- */

static void error_tests(void) {
  ncclParamHandle_t h = (ncclParamHandle_t)(uintptr_t)0x1234, good = bind("TUTTI_SPIN");
  ncclParamHandle_t str = bind("TUTTI_JOB_SECRET");
  CHECK(ncclParamBind(NULL, "TUTTI_SPIN") == ncclInvalidArgument, "Bind(NULL out)");
  CHECK(ncclParamBind(&h, NULL) == ncclInvalidArgument, "Bind(NULL key)");
  const char* unknown[] = {"SPIN", "tutti_spin", "TUTTI_SPIN ", "", "NCCL_NO_SUCH_THING"};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    CHECK(ncclParamBind(&h, unknown[i]) == ncclInvalidArgument &&
              h == (ncclParamHandle_t)(uintptr_t)0x1234,
          "Bind(\"%s\")", unknown[i]);
    CHECK(strstr(ncclGetLastError(NULL), "is not a parameter") != NULL, "sentence: %s",
          ncclGetLastError(NULL));
    const char* v = "untouched";
    int len = 99;
    CHECK(ncclParamGetParameter(unknown[i], &v, &len) == ncclInvalidArgument, "GetParameter(%s)",
          unknown[i]);
  }
  int64_t i64 = 5;
  int local = 0;
  ncclParamHandle_t bogus = (ncclParamHandle_t)(void*)&local;
  ncclParamHandle_t skewed = (ncclParamHandle_t)(void*)((char*)good + 1);
  CHECK(ncclParamGetI64(NULL, &i64) == ncclInvalidArgument, "GetI64(NULL handle)");
  CHECK(ncclParamGetI64(bogus, &i64) == ncclInvalidArgument, "GetI64(a foreign pointer)");
  CHECK(ncclParamGetI64(skewed, &i64) == ncclInvalidArgument, "GetI64(inside an entry)");
  CHECK(ncclParamGetI64(good, NULL) == ncclInvalidArgument, "GetI64(NULL out)");
  CHECK(i64 == 5, "a failed getter wrote %lld", (long long)i64);
  /* A string read by an integer getter: every one refuses it. */
  int8_t a;
  int16_t b;
  int32_t c;
  uint8_t d;
  uint16_t e;
  uint32_t f;
  uint64_t g;
  CHECK(ncclParamGetI8(str, &a) == ncclInvalidArgument, "GetI8(string)");
  CHECK(ncclParamGetI16(str, &b) == ncclInvalidArgument, "GetI16(string)");
  CHECK(ncclParamGetI32(str, &c) == ncclInvalidArgument, "GetI32(string)");
  CHECK(ncclParamGetI64(str, &i64) == ncclInvalidArgument, "GetI64(string)");
  CHECK(ncclParamGetU8(str, &d) == ncclInvalidArgument, "GetU8(string)");
  CHECK(ncclParamGetU16(str, &e) == ncclInvalidArgument, "GetU16(string)");
  CHECK(ncclParamGetU32(str, &f) == ncclInvalidArgument, "GetU32(string)");
  CHECK(ncclParamGetU64(str, &g) == ncclInvalidArgument, "GetU64(string)");
  CHECK(strstr(ncclGetLastError(NULL), "TUTTI_JOB_SECRET") != NULL, "sentence names the key: %s",
        ncclGetLastError(NULL));
  const char* s = NULL;
  CHECK(ncclParamGetStr(NULL, &s) == ncclInvalidArgument, "GetStr(NULL handle)");
  CHECK(ncclParamGetStr(bogus, &s) == ncclInvalidArgument, "GetStr(a foreign pointer)");
  CHECK(ncclParamGetStr(good, NULL) == ncclInvalidArgument, "GetStr(NULL out)");
  /* ncclParamGet: bad arguments leave *len alone; too small a buffer sets it to 0. */
  char buf[64];
  int len = 12345;
  CHECK(ncclParamGet(NULL, buf, 8, &len) == ncclInvalidArgument && len == 12345, "Get(NULL h)");
  CHECK(ncclParamGet(good, NULL, 8, &len) == ncclInvalidArgument && len == 12345, "Get(NULL out)");
  CHECK(ncclParamGet(good, buf, 8, NULL) == ncclInvalidArgument, "Get(NULL len)");
  CHECK(ncclParamGet(good, buf, 0, &len) == ncclInvalidArgument && len == 12345, "Get(maxLen 0)");
  CHECK(ncclParamGet(good, buf, -1, &len) == ncclInvalidArgument && len == 12345, "Get(-1)");
  CHECK(ncclParamGet(good, buf, 7, &len) == ncclInvalidArgument && len == 0, "Get(int64, 7)");
  len = 12345;
  CHECK(ncclParamGet(bind("TUTTI_HEARTBEAT_S"), buf, 3, &len) == ncclInvalidArgument && len == 0,
        "Get(int32, 3)");
  len = 12345;
  CHECK(ncclParamGet(str, buf, 6, &len) == ncclInvalidArgument && len == 0, "Get(\"s3cret\", 6)");
  const char* v = NULL;
  int vlen = 0;
  CHECK(ncclParamGetParameter(NULL, &v, &vlen) == ncclInvalidArgument, "GetParameter(NULL key)");
  CHECK(ncclParamGetParameter("TUTTI_SPIN", NULL, &vlen) == ncclInvalidArgument, "(NULL value)");
  CHECK(ncclParamGetParameter("TUTTI_SPIN", &v, NULL) == ncclInvalidArgument, "(NULL valueLen)");
  const char** table = NULL;
  int n = 0;
  CHECK(ncclParamGetAllParameterKeys(NULL, &n) == ncclInvalidArgument, "GetAllKeys(NULL table)");
  CHECK(ncclParamGetAllParameterKeys(&table, NULL) == ncclInvalidArgument, "GetAllKeys(NULL n)");
}

/* ---- Values: environment, config file, defaults; bytes and text. ---- */

static void value_tests(void) {
  CHECK(param_i64("TUTTI_SPIN") == 3, "environment: %lld", (long long)param_i64("TUTTI_SPIN"));
  CHECK(param_i64("TUTTI_YIELD") == 77, "config file: %lld", (long long)param_i64("TUTTI_YIELD"));
  CHECK(param_i64("TUTTI_REDUCE_ISA") == 2, "the environment wins over the file");
  CHECK(param_i64("TUTTI_CMA_DISABLE") == 0, "a malformed value takes the default");
  CHECK(param_i64("TUTTI_TIMEOUT") == 300, "default: %lld", (long long)param_i64("TUTTI_TIMEOUT"));
  CHECK(param_i64("NCCL_SOCKET_NTHREADS") == -1, "the first reader by file speaks for the key");
  CHECK(strcmp(param_text("TUTTI_SPIN"), "3") == 0, "integer as text");
  CHECK(strcmp(param_text("NCCL_HOSTID"), "conf-host") == 0, "string from the config file");
  CHECK(strcmp(param_text("NCCL_DEBUG"), "") == 0, "NCCL_DEBUG is read from the environment only");
  CHECK(strcmp(param_text("NCCL_NET"), "") == 0, "an empty value in the environment wins");
  CHECK(strcmp(param_text("TUTTI_JOB_SECRET"), "s3cret") == 0, "string from the environment");
  const char* s = NULL;
  CHECK_NCCL(ncclParamGetStr(bind("NCCL_SOCKET_NTHREADS"), &s));
  CHECK(s != NULL && strcmp(s, "-1") == 0, "GetStr of an integer: %s", s ? s : "NULL");
  CHECK_NCCL(ncclParamGetStr(bind("NCCL_ALGO"), &s));
  CHECK(s != NULL && strcmp(s, "") == 0, "GetStr of an unset string: \"%s\"", s ? s : "NULL");
  /* Raw bytes: int64 8, int32 4, a string with its NUL, in exactly as many bytes. */
  unsigned char buf[64];
  int len = 0;
  const int64_t three = 3;
  memset(buf, 0xee, sizeof buf);
  CHECK(ncclParamGet(bind("TUTTI_SPIN"), buf, 8, &len) == ncclSuccess && len == 8 &&
            memcmp(buf, &three, 8) == 0 && buf[8] == 0xee,
        "Get(int64)");
  const int32_t one = 1;
  memset(buf, 0xee, sizeof buf);
  CHECK(ncclParamGet(bind("TUTTI_HEARTBEAT_S"), buf, 64, &len) == ncclSuccess && len == 4 &&
            memcmp(buf, &one, 4) == 0 && buf[4] == 0xee,
        "Get(int32)");
  memset(buf, 0xee, sizeof buf);
  CHECK(ncclParamGet(bind("TUTTI_JOB_SECRET"), buf, 7, &len) == ncclSuccess && len == 7 &&
            memcmp(buf, "s3cret", 7) == 0 && buf[7] == 0xee,
        "Get(string)");
  CHECK(ncclParamGet(bind("NCCL_ALGO"), buf, 1, &len) == ncclSuccess && len == 1 && buf[0] == 0,
        "Get(unset string)");
  int8_t i8 = 0;
  uint8_t u8 = 9;
  CHECK(ncclParamGetI8(bind("NCCL_SOCKET_NTHREADS"), &i8) == ncclSuccess && i8 == -1, "-1 as I8");
  CHECK(ncclParamGetU8(bind("NCCL_SOCKET_NTHREADS"), &u8) == ncclInvalidArgument && u8 == 9,
        "-1 as U8");
  CHECK(strstr(ncclGetLastError(NULL), "NCCL_SOCKET_NTHREADS") != NULL &&
            strstr(ncclGetLastError(NULL), "-1") != NULL,
        "the sentence names the key and the value: %s", ncclGetLastError(NULL));
}

/* Integers keep their first value; strings are read at every use. */
static void cache_tests(void) {
  setenv("TUTTI_SPIN", "4", 1);
  setenv("TUTTI_JOB_SECRET", "other", 1);
  CHECK(param_i64("TUTTI_SPIN") == 3, "an integer is read once");
  CHECK(strcmp(param_text("TUTTI_JOB_SECRET"), "other") == 0, "a string is read at each use");
}

int main(void) {
  scan_sources();
  /* Only what this test sets: none of the runner's values. */
  for (int i = 0; i < ndeclared; i++) {
    unsetenv(declared[i]);
  }
  char conf[] = "/tmp/tutti-param-conf-XXXXXX";
  int fd = mkstemp(conf);
  const char* lines =
      "# a comment\n"
      "TUTTI_YIELD=77\n"
      "  TUTTI_REDUCE_ISA=1\n"
      "TUTTI_CMA_DISABLE=abc\n"
      "NCCL_HOSTID=conf-host\n"
      "NCCL_DEBUG=INFO\n"
      "NCCL_NET=from-file\n";
  CHECK(fd >= 0 && write(fd, lines, strlen(lines)) == (ssize_t)strlen(lines), "config file");
  close(fd);
  setenv("NCCL_CONF_FILE", conf, 1);
  setenv("TUTTI_SPIN", "3", 1);
  setenv("TUTTI_REDUCE_ISA", "2", 1);
  setenv("TUTTI_JOB_SECRET", "s3cret", 1);
  setenv("NCCL_NET", "", 1);
  /* Before the parent reads any integer: children inherit what it caches. */
  edge_tests();
  key_tests();
  error_tests();
  value_tests();
  cache_tests();
  unlink(conf);
  for (int i = 0; i < ndeclared; i++) {
    free(declared[i]);
  }
  return test_summary("param_api");
}
