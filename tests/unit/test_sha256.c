/* SHA-256 and HMAC-SHA256 (util/sha256.h) against FIPS 180-4's and RFC
 * 4231's vectors, and a message fed in uneven pieces. */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "util/sha256.h"

static void hex(const unsigned char* d, char* out) {
  for (int i = 0; i < TUTTI_SHA256_LEN; i++) {
    snprintf(out + 2 * i, 3, "%02x", d[i]);
  }
}

static void check_hash(const char* msg, size_t len, const char* want) {
  struct tutti_sha256 c;
  unsigned char d[TUTTI_SHA256_LEN];
  char got[65];
  tutti_sha256_init(&c);
  tutti_sha256_update(&c, msg, len);
  tutti_sha256_final(&c, d);
  hex(d, got);
  CHECK(strcmp(got, want) == 0, "sha256 of %zu bytes: %s, want %s", len, got, want);
}

static void check_hmac(const unsigned char* key, size_t key_len, const char* msg,
                       const char* want) {
  unsigned char d[TUTTI_SHA256_LEN];
  char got[65];
  const void* parts[2] = {msg, msg + strlen(msg) / 3};
  const size_t lens[2] = {strlen(msg) / 3, strlen(msg) - strlen(msg) / 3};
  tutti_sha256_hmac(key, key_len, 2, parts, lens, d);
  hex(d, got);
  CHECK(strcmp(got, want) == 0, "hmac with a %zu-byte key: %s, want %s", key_len, got, want);
}

int main(void) {
  check_hash("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  check_hash("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char* two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  check_hash(two, strlen(two), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  /* A million 'a' in pieces of 1 to 97 bytes: every split of a block. */
  static char a[1000000];
  memset(a, 'a', sizeof a);
  struct tutti_sha256 c;
  unsigned char d[TUTTI_SHA256_LEN];
  char got[65];
  tutti_sha256_init(&c);
  for (size_t at = 0, k = 1; at < sizeof a; k = k % 97 + 1) {
    const size_t take = sizeof a - at < k ? sizeof a - at : k;
    tutti_sha256_update(&c, a + at, take);
    at += take;
  }
  tutti_sha256_final(&c, d);
  hex(d, got);
  CHECK(strcmp(got, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0,
        "a million 'a': %s", got);

  /* RFC 4231 test cases 1, 2, 6 (a key longer than a block). */
  unsigned char k1[20];
  memset(k1, 0x0b, sizeof k1);
  check_hmac(k1, sizeof k1, "Hi There",
             "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  check_hmac((const unsigned char*)"Jefe", 4, "what do ya want for nothing?",
             "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  unsigned char k6[131];
  memset(k6, 0xaa, sizeof k6);
  check_hmac(k6, sizeof k6, "Test Using Larger Than Block-Size Key - Hash Key First",
             "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");

  unsigned char x[4] = {1, 2, 3, 4}, y[4] = {1, 2, 3, 5};
  CHECK(tutti_sha256_differ(x, x, 4) == 0 && tutti_sha256_differ(x, y, 4) != 0, "compare");
  tutti_sha256_wipe(x, sizeof x);
  CHECK(x[0] == 0 && x[3] == 0, "wiped");
  return test_summary("sha256");
}
