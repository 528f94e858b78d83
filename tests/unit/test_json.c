/* The one JSON escaper and checker (util/json.h): every byte a string may
 * hold comes out as valid JSON, and the checker accepts exactly one JSON
 * value, which is what RAS asks of each line a peer sends. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util/json.h"

static void check_escape(const char* in, size_t n, const char* want) {
  char out[256];
  size_t used = 0;
  const size_t k = tutti_json_escape(in, n, &used, out, sizeof out);
  CHECK(k == strlen(want) && strcmp(out, want) == 0 && used == n, "escape: got \"%s\", want \"%s\"",
        out, want);
}

static int valid(const char* s) {
  return tutti_json_valid(s, strlen(s), 8);
}

int main(void) {
  check_escape("plain", 5, "plain");
  check_escape("a\"b\\c", 5, "a\\\"b\\\\c");
  check_escape("l1\nl2\t\r\x01", 8, "l1\\nl2\\t\\r\\u0001");
  check_escape("caf\xc3\xa9", 5, "caf\xc3\xa9");            /* UTF-8 stays */
  check_escape("\xff\xc3", 2, "\\ufffd\\ufffd");            /* not UTF-8 */
  check_escape("\xed\xa0\x80", 3, "\\ufffd\\ufffd\\ufffd"); /* a surrogate */
  check_escape("a\0b", 3, "a\\u0000b");

  /* A full buffer ends on a whole escape, and says how far it got. */
  char small[6];
  size_t used = 0;
  size_t k = tutti_json_escape("ab\"cd", 5, &used, small, sizeof small);
  CHECK(k == 5 && used == 4 && strcmp(small, "ab\\\"c") == 0, "partial: %zu %zu %s", k, used,
        small);
  k = tutti_json_escape("abc\x01", 4, &used, small, sizeof small);
  CHECK(k == 3 && used == 3, "no half escape: %zu %zu", k, used);

  /* Every byte value, escaped and quoted, is one valid JSON string. */
  char all[256], esc[2048], doc[2100];
  for (int i = 0; i < 256; i++) {
    all[i] = (char)(255 - i);
  }
  k = tutti_json_escape(all, sizeof all, &used, esc, sizeof esc);
  snprintf(doc, sizeof doc, "\"%s\"", esc);
  CHECK(used == sizeof all && valid(doc), "all bytes: used %zu of 256", used);

  FILE* f = tmpfile();
  tutti_json_fput(f, "x\"\n");
  tutti_json_fput(f, NULL);
  rewind(f);
  char back[32] = {0};
  CHECK(fread(back, 1, sizeof back - 1, f) > 0 && strcmp(back, "\"x\\\"\\n\"null") == 0, "fput: %s",
        back);
  fclose(f);

  const char* good[] = {"{}", "[]",   " {\"a\":[1,-2.5e3,true,false,null,\"s\\u00e9\"]} ",
                        "0",  "\"\"", "{\"rank\":0,\"x\":{\"y\":[[]]}}"};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    CHECK(valid(good[i]), "valid: %s", good[i]);
  }
  const char* bad[] = {"",
                       "{",
                       "{}}",
                       "{\"a\"}",
                       "{\"a\":}",
                       "[1,]",
                       "01",
                       "1.",
                       "-",
                       "\"\\x\"",
                       "\"a\nb\"",
                       "{} {}",
                       "tru",
                       "{\"a\":1,}",
                       "[1 2]",
                       "\"\\u12\"",
                       "{a:1}",
                       "\"\xff\"",
                       "{\"rank\":0}],\"x\":[{"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK(!valid(bad[i]), "invalid: %s", bad[i]);
  }
  CHECK(valid("[[[[[[[[1]]]]]]]]") && !valid("[[[[[[[[[1]]]]]]]]]"), "depth 8");
  /* A long input is checked in linear time: a million nested-free items. */
  const size_t n = 2000000;
  char* big = malloc(n + 3);
  big[0] = '[';
  for (size_t i = 1; i < n; i += 2) {
    big[i] = '1';
    big[i + 1] = ',';
  }
  big[n - 1] = '1';
  big[n] = ']';
  CHECK(tutti_json_valid(big, n + 1, 8), "a long array");
  free(big);
  return test_summary("json");
}
