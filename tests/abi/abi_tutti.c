/* ABI facts under tutti's own nccl.h. */
#include "nccl.h"

#include "abi_layout.h"
#include "abi_facts.inc"

void abi_facts_tutti(struct abi_facts* f) {
  gather(f);
}
