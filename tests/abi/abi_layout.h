/* The facts of the ABI, gathered once under NVIDIA's nccl.h and once under
 * tutti's, then compared. Neither header is included here. */
#ifndef TUTTI_TEST_ABI_LAYOUT_H
#define TUTTI_TEST_ABI_LAYOUT_H

#include <stddef.h>

#define ABI_FACTS 64

struct abi_facts {
  int n;
  const char* name[ABI_FACTS];
  long long value[ABI_FACTS];
};

void abi_facts_nvidia(struct abi_facts* f);
void abi_facts_tutti(struct abi_facts* f);

#endif
