/* Finds the process's network plugin, once: NCCL_NET_PLUGIN's entries in
 * order (or libnccl-net.so), in each the newest ncclNetPlugin_vN. The
 * library stays loaded for the life of the process: comms, threads and
 * memory registrations of any communicator may still use it. */
#define _GNU_SOURCE /* dlinfo */
#include <ctype.h>
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/plugin/plugin.h"
#include "util/log.h"
#include "util/param.h"

static const struct {
  const char* symbol;
  int abi;
  ncclResult_t (*bind)(int abi, const void* table, struct tutti_netplugin_adapter* a);
} versions[] = {
    /* newest first: the first found wins */
    {"ncclNetPlugin_v12", 12, tutti_netplugin_bind_v11},
    {"ncclNetPlugin_v11", 11, tutti_netplugin_bind_v11},
    {"ncclNetPlugin_v10", 10, tutti_netplugin_bind_v9},
    {"ncclNetPlugin_v9", 9, tutti_netplugin_bind_v9},
    {"ncclNetPlugin_v8", 8, tutti_netplugin_bind_v6},
    {"ncclNetPlugin_v7", 7, tutti_netplugin_bind_v6},
    {"ncclNetPlugin_v6", 6, tutti_netplugin_bind_v6},
};

static struct tutti_netplugin plugin;
static struct tutti_net loaded; /* what tutti_net_loaded shows: not opened, no ops */
static int have_plugin;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* Where the dynamic loader found the library; `file` if it cannot say. */
static void library_path(void* handle, const char* file, char* out, size_t len) {
  struct link_map* map = NULL;
  const char* path = file;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != NULL && map->l_name != NULL &&
      map->l_name[0] != '\0') {
    path = map->l_name;
  }
  snprintf(out, len, "%s", path);
}

/* 1 when `file` loads and exports a version tutti speaks (then `plugin`
 * holds it), else 0 with the reason in err. */
static int try_file(const char* file, int named, char* err, size_t err_len) {
  void* handle = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    const char* e = dlerror();
    snprintf(err, err_len, "%s", e != NULL ? e : "dlopen failed");
    INFO(TUTTI_INIT | TUTTI_NET, "NET/Plugin: could not load %s: %s", file, err);
    return 0;
  }
  char path[sizeof plugin.path];
  library_path(handle, file, path, sizeof path);
  for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
    const void* table = dlsym(handle, versions[i].symbol);
    if (table == NULL || versions[i].bind(versions[i].abi, table, &plugin.adapter) != ncclSuccess) {
      continue;
    }
    /* Every version's table starts with the network's name. */
    const char* name = *(const char* const*)table;
    plugin.table = table;
    plugin.abi = versions[i].abi;
    plugin.named = named;
    snprintf(plugin.name, sizeof plugin.name, "%s", name != NULL ? name : "");
    memcpy(plugin.path, path, sizeof plugin.path);
    INFO(TUTTI_INIT | TUTTI_NET, "NET/Plugin: loaded %s: network \"%s\", %s", plugin.path,
         plugin.name, versions[i].symbol);
    return 1;
  }
  snprintf(err, err_len, "%.400s exports none of ncclNetPlugin_v12 ... _v6", path);
  INFO(TUTTI_INIT | TUTTI_NET,
       "NET/Plugin: %s is unsupported: it exports none of "
       "ncclNetPlugin_v12 ... ncclNetPlugin_v6",
       path);
  dlclose(handle); /* nothing of it is used */
  return 0;
}

/* A name NCCL would not prefix: a path, or already lib<something>.so. */
static int is_file_name(const char* entry) {
  const size_t len = strlen(entry);
  return strchr(entry, '/') != NULL ||
         (strncmp(entry, "lib", 3) == 0 && len >= 3 + 3 && strcmp(entry + len - 3, ".so") == 0);
}

/* One entry of NCCL_NET_PLUGIN: as given, then as libnccl-net-<entry>.so. */
static int try_entry(const char* entry, char* err, size_t err_len) {
  if (try_file(entry, 1, err, err_len)) {
    return 1;
  }
  if (is_file_name(entry)) {
    return 0;
  }
  char file[512];
  snprintf(file, sizeof file, "libnccl-net-%s.so", entry);
  return try_file(file, 1, err, err_len);
}

static char* trim(char* s) {
  while (isspace((unsigned char)*s)) {
    s++;
  }
  size_t n = strlen(s);
  while (n > 0 && isspace((unsigned char)s[n - 1])) {
    s[--n] = '\0';
  }
  return s;
}

static TUTTI_PARAM_STR(net_plugin, "NCCL_NET_PLUGIN", NULL,
                       "a comma list of paths or names (each tried as given, then as "
                       "libnccl-net-<name>.so); none: no plugin",
                       "the network plugin to load (unset: libnccl-net.so if the dynamic loader "
                       "finds one)");

static void load(void) {
  char err[512] = "";
  const char* env = tutti_param_net_plugin();
  if (env == NULL || *env == '\0') {
    have_plugin = try_file("libnccl-net.so", 0, err, sizeof err);
    if (!have_plugin) {
      INFO(TUTTI_INIT | TUTTI_NET, "NET/Plugin: no libnccl-net.so: tutti's own transport");
    }
  } else {
    char* list = strdup(env);
    char* save = NULL;
    int tried = 0;
    for (char* t = list != NULL ? strtok_r(list, ",", &save) : NULL; t != NULL && !have_plugin;
         t = strtok_r(NULL, ",", &save)) {
      char* entry = trim(t);
      if (strcasecmp(entry, "none") == 0) {
        break; /* "none" ends the list: nothing after it is wanted */
      }
      if (*entry != '\0') {
        tried++;
        have_plugin = try_entry(entry, err, sizeof err);
      }
    }
    free(list);
    if (!have_plugin && tried == 0) {
      INFO(TUTTI_INIT | TUTTI_NET, "NET/Plugin: NCCL_NET_PLUGIN=%s: no network plugin", env);
    } else if (!have_plugin) {
      WARN(
          "NET/Plugin: NCCL_NET_PLUGIN=\"%s\": no network plugin could be loaded (last: %s); "
          "tutti uses its own transport. Check the name and LD_LIBRARY_PATH, or unset it",
          env, err);
    }
  }
  if (have_plugin) {
    loaded.abi = plugin.abi;
    loaded.table = plugin.table;
    memcpy(loaded.name, plugin.name, sizeof loaded.name);
    memcpy(loaded.path, plugin.path, sizeof loaded.path);
  }
}

const struct tutti_netplugin* tutti_netplugin_load(void) {
  pthread_once(&load_once, load);
  return have_plugin ? &plugin : NULL;
}

const struct tutti_net* tutti_net_loaded(void) {
  return tutti_netplugin_load() != NULL ? &loaded : NULL;
}
