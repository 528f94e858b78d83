/* tuttirun's command line: torchrun's flags (either spelling, --flag=value,
 * PET_<FLAG> variables as defaults), plus tuttirun's own, turned into a job. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "opts.h"
#include "tuttirun.h"

enum opt_id {
  O_NPROC,
  O_NNODES,
  O_NODE_RANK,
  O_ADDR,
  O_PORT,
  O_STANDALONE,
  O_SECRET,
  O_RDZV_ID,
  O_BACKEND,
  O_ENDPOINT,
  O_CONF,
  O_RESTARTS,
  O_MONITOR,
  O_START,
  O_ROLE,
  O_MODULE,
  O_NO_PYTHON,
  O_RUN_PATH,
  O_LOG_DIR,
  O_REDIRECTS,
  O_TEE,
  O_FILTER,
  O_LOCAL_ADDR,
  O_LOGS_SPECS,
  O_EVENT_LOG,
  O_NUMA,
  O_SIGNALS,
  O_NO_PREFIX,
  O_GRACE,
  O_HELP
};

static const struct {
  const char* name;
  enum opt_id id;
  int has_arg;
  int pet; /* torchrun reads PET_<NAME> for it */
} options[] = {
    {"nproc_per_node", O_NPROC, 1, 1},
    {"nnodes", O_NNODES, 1, 1},
    {"node_rank", O_NODE_RANK, 1, 1},
    {"master_addr", O_ADDR, 1, 1},
    {"master_port", O_PORT, 1, 1},
    {"standalone", O_STANDALONE, 0, 1},
    {"job_secret", O_SECRET, 1, 0},
    {"rdzv_id", O_RDZV_ID, 1, 1},
    {"rdzv_backend", O_BACKEND, 1, 1},
    {"rdzv_endpoint", O_ENDPOINT, 1, 1},
    {"rdzv_conf", O_CONF, 1, 1},
    {"max_restarts", O_RESTARTS, 1, 1},
    {"monitor_interval", O_MONITOR, 1, 1},
    {"start_method", O_START, 1, 1},
    {"role", O_ROLE, 1, 1},
    {"module", O_MODULE, 0, 1},
    {"no_python", O_NO_PYTHON, 0, 1},
    {"run_path", O_RUN_PATH, 0, 1},
    {"log_dir", O_LOG_DIR, 1, 1},
    {"redirects", O_REDIRECTS, 1, 1},
    {"tee", O_TEE, 1, 1},
    {"local_ranks_filter", O_FILTER, 1, 1},
    {"local_addr", O_LOCAL_ADDR, 1, 1},
    {"logs_specs", O_LOGS_SPECS, 1, 0},
    {"event_log_handler", O_EVENT_LOG, 1, 1},
    {"numa_binding", O_NUMA, 1, 0},
    {"signals_to_handle", O_SIGNALS, 1, 1},
    {"no_prefix", O_NO_PREFIX, 0, 0},
    {"grace_period", O_GRACE, 1, 0},
    {"help", O_HELP, 0, 0},
};
#define NOPTS (sizeof options / sizeof options[0])

/* What the flags said, before they are checked against each other. */
static struct {
  const char *nproc, *nnodes, *endpoint, *conf, *redirects, *tee, *filter, *rdzv_id;
  int backend_c10d, standalone, module, no_python, run_path, short_n, port_given;
} f;

/* rdzv_conf: key=value,... ; the keys tuttirun uses, the rest noted. */
static void parse_conf(struct tr_job* j, const char* s) {
  char buf[2048];
  tr_copy_arg(buf, sizeof buf, "--rdzv_conf", s);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
       tok = strtok_r(NULL, ",", &save)) {
    char* eq = strchr(tok, '=');
    if (eq == NULL) {
      tr_usage_error("--rdzv_conf \"%s\": want key=value pairs", s);
    }
    *eq = '\0';
    const char* v = eq + 1;
    if (strcmp(tok, "join_timeout") == 0) {
      j->join_timeout = tr_parse_seconds("join_timeout", v, 0, 1e7);
    } else if (strcmp(tok, "last_call_timeout") == 0) {
      j->last_call_timeout = tr_parse_seconds("last_call_timeout", v, 0, 1e7);
    } else if (strcmp(tok, "read_timeout") == 0 || strcmp(tok, "timeout") == 0) {
      j->read_timeout = tr_parse_seconds(tok, v, 1e-3, 1e7);
    } else if (strcmp(tok, "is_host") == 0) {
      j->is_host = strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0;
    } else if (strcmp(tok, "store_type") == 0 && strcmp(v, "tcp") != 0) {
      tr_usage_error("--rdzv_conf store_type=%s: tuttirun's rendezvous store is TCP only", v);
    } else {
      tr_note("--rdzv_conf %s=%s has no meaning for tuttirun; ignored", tok, v);
    }
  }
}

static void set_option(struct tr_job* j, enum opt_id id, const char* flag, const char* v) {
  switch (id) {
    case O_NPROC:
      f.nproc = v;
      break;
    case O_NNODES:
      f.nnodes = v;
      break;
    case O_NODE_RANK:
      j->node_rank = tr_parse_int(flag, v, 0, 1 << 20);
      break;
    case O_ADDR: {
      size_t l = strlen(v);
      int br = l >= 2 && v[0] == '[' && v[l - 1] == ']';
      if (l == 0 || l - (size_t)(2 * br) >= sizeof j->master_addr) {
        tr_usage_error("--master_addr \"%s\" is empty or too long", v);
      }
      snprintf(j->master_addr, sizeof j->master_addr, "%.*s", (int)(l - (size_t)(2 * br)), v + br);
      break;
    }
    case O_PORT:
      j->master_port = tr_parse_int(flag, v, 1, 65534);
      f.port_given = 1;
      break;
    case O_STANDALONE:
      f.standalone = 1;
      break;
    case O_SECRET:
      tr_copy_arg(j->secret, sizeof j->secret, flag, v);
      break;
    case O_RDZV_ID:
      f.rdzv_id = v;
      break;
    case O_BACKEND:
      if (strcmp(v, "c10d") != 0 && strcmp(v, "static") != 0) {
        tr_usage_error("--rdzv_backend %s is not supported: use c10d or static", v);
      }
      f.backend_c10d = strcmp(v, "c10d") == 0;
      break;
    case O_ENDPOINT:
      f.endpoint = v;
      break;
    case O_CONF:
      f.conf = v;
      break;
    case O_RESTARTS:
      j->max_restarts = tr_parse_int(flag, v, 0, 1 << 20);
      break;
    case O_MONITOR:
      j->monitor_interval = tr_parse_seconds(flag, v, 1e-3, 3600);
      break;
    case O_START:
      if (strcmp(v, "spawn") != 0 && strcmp(v, "fork") != 0 && strcmp(v, "forkserver") != 0) {
        tr_usage_error("--start_method %s: want spawn, fork or forkserver", v);
      }
      break; /* workers are always programs started by fork+exec, as torchrun's are */
    case O_ROLE:
      tr_copy_arg(j->role, sizeof j->role, flag, v);
      break;
    case O_MODULE:
      f.module = 1;
      break;
    case O_NO_PYTHON:
      f.no_python = 1;
      break;
    case O_RUN_PATH:
      f.run_path = 1;
      break;
    case O_LOG_DIR:
      j->log_dir = v;
      break;
    case O_REDIRECTS:
      f.redirects = v;
      break;
    case O_TEE:
      f.tee = v;
      break;
    case O_FILTER:
      f.filter = v;
      break;
    case O_LOCAL_ADDR:
      tr_copy_arg(j->local_addr, sizeof j->local_addr, flag, v);
      break;
    case O_LOGS_SPECS:
      tr_note("--logs_specs %s: tuttirun has one way to keep logs; ignored", v);
      break;
    case O_EVENT_LOG:
      if (strcmp(v, "null") != 0) {
        tr_note("--event_log_handler %s: tuttirun records no events; ignored", v);
      }
      break;
    case O_NUMA:
      tr_note("--numa_binding %s: tuttirun does not bind ranks to NUMA nodes", v);
      break;
    case O_SIGNALS: /* SIGINT, SIGTERM and SIGHUP stop the job (usage); workers see the list */
      tr_copy_arg(j->signals, sizeof j->signals, flag, v);
      break;
    case O_NO_PREFIX:
      j->prefix = 0;
      break;
    case O_GRACE:
      j->grace_s = tr_parse_seconds(flag, v, 0, 86400);
      break;
    case O_HELP:
      fputs(tr_usage_text, stdout);
      exit(0);
  }
}

/* torchrun's PET_<NAME> variables stand in for flags not given. */
static void apply_pet_env(struct tr_job* j) {
  for (size_t k = 0; k < NOPTS; k++) {
    char var[64], flag[64];
    snprintf(var, sizeof var, "PET_%s", options[k].name);
    for (char* p = var; *p != '\0'; p++) {
      *p = (char)toupper((unsigned char)*p);
    }
    const char* v = getenv(var);
    if (!options[k].pet || v == NULL) {
      continue;
    }
    snprintf(flag, sizeof flag, "%s", var);
    if (options[k].has_arg) {
      set_option(j, options[k].id, flag, v);
    } else if (tr_parse_int(flag, v, 0, 1 << 30) != 0) {
      set_option(j, options[k].id, flag, NULL);
    }
  }
}

/* Index of the first non-option argument (the program). */
static int parse_argv(int argc, char** argv, struct tr_job* j) {
  int i = 1;
  while (i < argc && argv[i][0] == '-' && argv[i][1] != '\0') {
    const char* a = argv[i++];
    if (strcmp(a, "--") == 0) {
      break;
    }
    if (a[1] != '-') { /* short flags: -n N, -m, -r V, -t V, -h */
      const char* v = a[2] != '\0' ? a + 2 : NULL;
      char c = a[1];
      if (c == 'h' || c == 'm') {
        if (v != NULL) {
          tr_usage_error("unknown flag %s", a);
        }
        set_option(j, c == 'h' ? O_HELP : O_MODULE, a, NULL);
        continue;
      }
      if (c != 'n' && c != 'r' && c != 't') {
        tr_usage_error("unknown flag %s", a);
      }
      v = v != NULL ? v : (i < argc ? argv[i++] : NULL);
      if (v == NULL) {
        tr_usage_error("%s needs a value", a);
      }
      if (c == 'n') {
        j->nlocal = tr_parse_int("-n", v, 1, TR_MAX_LOCAL_RANKS);
        f.nproc = NULL;
        f.short_n = 1;
      } else {
        set_option(j, c == 'r' ? O_REDIRECTS : O_TEE, a, v);
      }
      continue;
    }
    char name[64];
    size_t nlen = strcspn(a + 2, "=");
    snprintf(name, sizeof name, "%.*s", (int)nlen, a + 2);
    for (char* p = name; *p != '\0'; p++) {
      *p = *p == '-' ? '_' : *p;
    }
    char flag[70]; /* for messages: "--nproc_per_node", whatever the spelling */
    snprintf(flag, sizeof flag, "--%s", name);
    const char* inline_val = a[2 + nlen] == '=' ? a + 3 + nlen : NULL;
    size_t k = 0;
    while (k < NOPTS && strcmp(options[k].name, name) != 0) {
      k++;
    }
    if (k == NOPTS) {
      tr_usage_error("unknown flag %s", a);
    }
    const char* v = NULL;
    if (options[k].has_arg) {
      v = inline_val != NULL ? inline_val : (i < argc ? argv[i++] : NULL);
      if (v == NULL) {
        tr_usage_error("%s needs a value", flag);
      }
    } else if (inline_val != NULL) {
      tr_usage_error("%s takes no value", flag);
    }
    set_option(j, options[k].id, flag, v);
  }
  return i;
}

static void build_argv(struct tr_job* j, int argc, char** argv, int first) {
  int python = !f.no_python && (f.module || f.run_path || tr_is_python_target(argv[first]));
  if (f.module && f.no_python) {
    tr_usage_error("--module and --no_python do not go together");
  }
  char** v = calloc((size_t)(argc - first) + 4, sizeof *v);
  if (v == NULL) {
    exit(1);
  }
  int n = 0;
  if (python) {
    v[n++] = (char*)tr_find_python();
    v[n++] = "-u";
    if (f.module) {
      v[n++] = "-m";
    }
  }
  for (int i = first; i < argc; i++) {
    v[n++] = argv[i];
  }
  j->argv = v;
}

void tr_opts_parse(int argc, char** argv, struct tr_job* j) {
  memset(&f, 0, sizeof f);
  apply_pet_env(j);
  int first = parse_argv(argc, argv, j);
  if (first >= argc) {
    tr_usage_error("no program to run");
  }
  if (f.nproc != NULL) {
    j->nlocal = tr_local_world_size(f.nproc);
  }
  j->min_nodes = j->max_nodes = 1;
  if (f.nnodes != NULL) {
    char lo[32];
    const char* colon = strchr(f.nnodes, ':');
    snprintf(lo, sizeof lo, "%.*s", colon != NULL ? (int)(colon - f.nnodes) : 31, f.nnodes);
    j->min_nodes = tr_parse_int("--nnodes", lo, 1, 1 << 20);
    j->max_nodes = colon != NULL ? tr_parse_int("--nnodes", colon + 1, 1, 1 << 20) : j->min_nodes;
    if (j->min_nodes > j->max_nodes) {
      tr_usage_error("--nnodes %s: the minimum is above the maximum", f.nnodes);
    }
  }
  if (f.standalone) { /* as torchrun: c10d on a free local port, a fresh run id */
    f.backend_c10d = 1;
    f.endpoint = "localhost:0";
    char id[64];
    tr_uuid4(id, sizeof id);
    tr_copy_arg(j->run_id, sizeof j->run_id, "--rdzv_id", id);
    j->run_id_given = 1;
  } else if (f.rdzv_id != NULL) {
    tr_copy_arg(j->run_id, sizeof j->run_id, "--rdzv_id", f.rdzv_id);
    j->run_id_given = strcmp(f.rdzv_id, "none") != 0;
  }
  j->c10d = f.backend_c10d;
  if ((f.short_n || f.standalone) && j->max_nodes != 1) {
    tr_usage_error("%s is for one host, but --nnodes is %s", f.short_n ? "-n" : "--standalone",
                   f.nnodes);
  }
  if (f.conf != NULL) {
    parse_conf(j, f.conf);
  }
  if (j->c10d) {
    if (f.endpoint == NULL || *f.endpoint == '\0') {
      tr_usage_error("--rdzv_backend c10d needs --rdzv_endpoint host[:port]");
    }
    j->rdzv_port = TR_DEFAULT_RDZV_PORT;
    tr_parse_endpoint("--rdzv_endpoint", f.endpoint, j->rdzv_host, sizeof j->rdzv_host,
                      &j->rdzv_port);
    if (f.port_given) {
      tr_note("--master_port is for the static rendezvous; c10d picks the port of rank 0's store");
    }
  } else {
    if (j->min_nodes != j->max_nodes) {
      tr_usage_error("--nnodes %s: a range of nodes needs --rdzv_backend c10d", f.nnodes);
    }
    if (f.endpoint != NULL && *f.endpoint != '\0') { /* torchrun: it stands for master addr:port */
      j->master_port = TR_DEFAULT_PORT;
      tr_parse_endpoint("--rdzv_endpoint", f.endpoint, j->master_addr, sizeof j->master_addr,
                        &j->master_port);
    }
    if (j->node_rank >= j->max_nodes) {
      tr_usage_error("--node_rank %d is not below --nnodes %d", j->node_rank, j->max_nodes);
    }
    if (j->master_port < 0 && j->max_nodes > 1) {
      j->master_port = TR_DEFAULT_PORT;
    }
  }
  if ((long)j->max_nodes * j->nlocal > (1L << 30)) {
    tr_usage_error("%d hosts x %d ranks is too many", j->max_nodes, j->nlocal);
  }
  j->redirects = calloc((size_t)j->nlocal, 1);
  j->tees = calloc((size_t)j->nlocal, 1);
  j->on_console = malloc((size_t)j->nlocal);
  if (j->redirects == NULL || j->tees == NULL || j->on_console == NULL) {
    exit(1);
  }
  if (f.redirects != NULL) {
    tr_parse_std("--redirects", f.redirects, j->redirects, j->nlocal);
  }
  if (f.tee != NULL) {
    tr_parse_std("--tee", f.tee, j->tees, j->nlocal);
  }
  memset(j->on_console, 1, (size_t)j->nlocal);
  if (f.filter != NULL && *f.filter != '\0') {
    memset(j->on_console, 0, (size_t)j->nlocal);
    char buf[1024];
    tr_copy_arg(buf, sizeof buf, "--local_ranks_filter", f.filter);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
      int r = tr_parse_int("--local_ranks_filter", tok, 0, 1 << 30);
      if (r < j->nlocal) {
        j->on_console[r] = 1;
      }
    }
  }
  build_argv(j, argc, argv, first);
}

void tr_opts_free(struct tr_job* j) {
  free(j->argv);
  free(j->redirects);
  free(j->tees);
  free(j->on_console);
}
