/* The unique id: 128 bytes that every rank receives from rank 0 through
 * whatever channel the application uses (MPI, a file, a TCP store), decoded
 * by tutti_bootstrap_id_decode. The target compiles uid.c itself, so that
 * the driver's coverage feedback sees the decoder. */
#include "bootstrap/uid.c"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  memcpy(id.internal, data, size < sizeof id ? size : sizeof id);
  struct tutti_bs_id out;
  memset(&out, 0xa5, sizeof out);
  ncclResult_t r = tutti_bootstrap_id_decode(&id, &out);
  FUZZ_ASSERT(r == ncclSuccess || r == ncclInvalidArgument, "result %d", (int)r);
  FUZZ_ASSERT(tutti_bootstrap_check_id(&id) == r, "check_id agrees with decode");
  if (r != ncclSuccess) {
    FUZZ_ASSERT(strstr(tutti_last_error(), "unique id") != NULL, "a sentence: %s",
                tutti_last_error());
    return 0;
  }
  int fam = out.root.sa.sa_family;
  FUZZ_ASSERT(fam == AF_INET || fam == AF_INET6, "family %d", fam);
  FUZZ_ASSERT(tutti_socket_port(&out.root) != 0, "port 0 accepted");
  FUZZ_ASSERT(out.flags <= 0xffff, "flags %x", out.flags);
  char text[TUTTI_SOCKET_ADDR_STRLEN];
  tutti_socket_format(&out.root, text, sizeof text);
  FUZZ_ASSERT(strlen(text) < sizeof text, "formatted");
  /* Packing what was decoded and decoding it again gives the same address. */
  unsigned char wire[TUTTI_SOCKET_ADDR_WIRE];
  union tutti_socket_addr again;
  tutti_socket_addr_pack(&out.root, wire);
  FUZZ_ASSERT(tutti_socket_addr_unpack(wire, &again) == 0, "repacked address decodes");
  FUZZ_ASSERT(memcmp(&again, &out.root, sizeof again) == 0, "same address after a round trip");
  unsigned char secret[TUTTI_BS_SECRET];
  tutti_bootstrap_id_secret(&id, secret);
  FUZZ_ASSERT(memcmp(secret, out.secret, sizeof secret) == 0, "same secret");
  return 0;
}
