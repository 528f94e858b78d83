/* The facts of the ABI, gathered once under NVIDIA's nccl.h and once under
 * tutti's, then compared. Neither header is included here. */
#ifndef TUTTI_TEST_ABI_LAYOUT_H
#define TUTTI_TEST_ABI_LAYOUT_H

#include <stddef.h>

#define ABI_FACTS 192

struct abi_facts {
  int n;
  long long version; /* NCCL_VERSION_CODE of the header */
  const char* name[ABI_FACTS];
  int release[ABI_FACTS]; /* 1: a fact of the header's release (compared within one) */
  long long value[ABI_FACTS];
};

void abi_facts_nvidia(struct abi_facts* f);
void abi_facts_tutti(struct abi_facts* f);

#endif
