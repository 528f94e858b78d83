/* A library a plugin search may find that tutti cannot use: it exports no
 * ncclNetPlugin_v6 ... v12, only a table of an older version (v5). */
struct old_table {
  const char* name;
};

__attribute__((visibility("default"))) const struct old_table ncclNetPlugin_v5 = {"Old"};
