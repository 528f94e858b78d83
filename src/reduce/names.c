/* Sizes and names of the datatypes and reductions. */
#include <stddef.h>

#include "reduce/reduce_impl.h"

size_t tutti_type_size(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* tutti_type_name(ncclDataType_t type) {
  static const char* const names[ncclNumTypes] = {"int8",   "uint8",    "int32",  "uint32",
                                                  "int64",  "uint64",   "half",   "float",
                                                  "double", "bfloat16", "f8e4m3", "f8e5m2"};
  return (unsigned)type < ncclNumTypes ? names[type] : "unknown";
}

const char* tutti_red_name(enum tutti_red_kind kind) {
  static const char* const names[] = {"sum", "prod", "max", "min", "premulsum", "sumpostdiv"};
  return (unsigned)kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "unknown";
}
