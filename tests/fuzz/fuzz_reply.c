/* A rank's side of joining the job: the root's reply to its HELLO (a TABLE
 * of every rank's address, or an ERROR with a result code and a sentence),
 * as read_reply and read_table decode it. Whoever answers on the root's
 * address is not necessarily the root.
 *
 * The target compiles bootstrap.c itself. Input: byte 0 is the number of
 * ranks (1 to 64), the rest is what the "root" sends before closing. */
#include "bootstrap/bootstrap.c"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  struct fuzz_in in = {data, size};
  struct tutti_bootstrap b;
  memset(&b, 0, sizeof b);
  b.nranks = 1 + fuzz_u8(&in) % 64;
  b.rank = b.nranks - 1;
  b.timeout_s = 5;
  b.listen_fd = b.next_fd = b.prev_fd = -1;
  int fds[2];
  fuzz_pair(fds);
  size_t got;
  const uint8_t* stream = fuzz_take(&in, in.n, &got);
  fuzz_write(fds[1], stream, got);
  shutdown(fds[1], SHUT_WR);
  struct tutti_socket_io io = {tutti_socket_now() + 5, NULL, "the bootstrap root at fuzz",
                               "bootstrap init of a fuzzed rank"};
  ncclResult_t r = read_reply(&b, fds[0], &io);
  FUZZ_ASSERT(r != ncclSuccess || (b.addrs != NULL && b.addr_text != NULL),
              "success without a table");
  if (r == ncclSuccess) {
    FUZZ_ASSERT(got >= TUTTI_BS_HEADER + (size_t)b.nranks * TUTTI_SOCKET_ADDR_WIRE,
                "a table from %zu bytes", got);
    for (int i = 0; i < b.nranks; i++) {
      int fam = b.addrs[i].sa.sa_family;
      FUZZ_ASSERT(fam == AF_INET || fam == AF_INET6, "rank %d family %d", i, fam);
      FUZZ_ASSERT(b.addr_text[i][0] != '\0' && strlen(b.addr_text[i]) < sizeof b.addr_text[i],
                  "rank %d address text", i);
    }
  } else {
    FUZZ_ASSERT(r > ncclSuccess && r < ncclNumResults, "result %d", (int)r);
    FUZZ_ASSERT(tutti_last_error()[0] != '\0', "an error sentence");
  }
  free(b.addrs);
  free(b.addr_text);
  close(fds[0]);
  close(fds[1]);
  return 0;
}
