/* The host side of the report: library version, CPU and memory, network
 * interfaces (and the one tutti chooses, by the library's own rules), and
 * the shared-memory file system. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "check.h"
#include "nccl.h"
#include "topo/ifaces.h"
#include "util/param.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define SHM_MIN_BYTES (1ull << 30)
#define SHM_FIX                                                                                \
  "start the container with --shm-size=8g (docker run --shm-size=8g ..., or in Kubernetes an " \
  "emptyDir volume with medium: Memory mounted at /dev/shm)"

void probe_library(void) {
  int v = 0;
  ncclResult_t r = ncclGetVersion(&v);
  report_json_begin("library", 0);
  report_json_str("name", "tutti");
  report_json_str("version", TUTTI_VERSION_STRING);
  report_json_int("nccl_version_code", v);
  report_json_end();
  if (r != ncclSuccess || v != NCCL_VERSION_CODE) {
    report_check("library", CHECK_FAIL,
                 "the tutti library and its nccl.h must come from the same build: reinstall it",
                 "ncclGetVersion returned %d (version %d, this build's header says %d)", (int)r, v,
                 NCCL_VERSION_CODE);
    return;
  }
  report_check("library", CHECK_PASS, NULL, "tutti %s, NCCL API %d.%d.%d (ncclGetVersion %d)",
               TUTTI_VERSION_STRING, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, v);
}

/* The value of "key:" in a /proc file like /proc/cpuinfo, or "". */
static void proc_value(const char* path, const char* key, char* out, size_t len) {
  out[0] = '\0';
  FILE* f = fopen(path, "r");
  char line[512];
  size_t klen = strlen(key);
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, key, klen) == 0 &&
        (line[klen] == ':' || line[klen] == ' ' || line[klen] == '\t')) {
      char* v = strchr(line, ':');
      if (v != NULL) {
        v++;
        v += strspn(v, " \t");
        v[strcspn(v, "\n")] = '\0';
        snprintf(out, len, "%s", v);
      }
      break;
    }
  }
  if (f != NULL) {
    fclose(f);
  }
}

/* A cgroup v2 limit ("max" or a number), or -1 when there is none. */
static double cgroup_limit(const char* file) {
  char path[256], buf[128];
  snprintf(path, sizeof path, "/sys/fs/cgroup/%s", file);
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    return -1;
  }
  double v = -1;
  if (fgets(buf, sizeof buf, f) != NULL && strncmp(buf, "max", 3) != 0) {
    v = strtod(buf, NULL);
    if (strcmp(file, "cpu.max") == 0) {
      char* sp = strchr(buf, ' ');
      double period = sp != NULL ? strtod(sp + 1, NULL) : 0;
      v = period > 0 ? v / period : -1;
    }
  }
  fclose(f);
  return v;
}

void probe_cpu_memory(void) {
  char model[256], total[64], avail[64];
  proc_value("/proc/cpuinfo", "model name", model, sizeof model);
  if (model[0] == '\0') {
    proc_value("/proc/cpuinfo", "CPU part", model, sizeof model); /* arm64 */
  }
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t set;
  int usable = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)online;
  double quota = cgroup_limit("cpu.max");
  report_json_begin("cpu", 0);
  report_json_str("model", model[0] ? model : "unknown");
  report_json_int("online", online);
  report_json_int("usable", usable);
  if (quota > 0) {
    report_json_num("cgroup_quota", quota);
  }
  report_json_end();
  char q[64] = "";
  if (quota > 0) {
    snprintf(q, sizeof q, ", cgroup quota %.3g CPUs", quota);
  }
  report_line("cpu", "%s, %ld online, %d usable by this process%s", model[0] ? model : "unknown",
              online, usable, q);

  proc_value("/proc/meminfo", "MemTotal", total, sizeof total);
  proc_value("/proc/meminfo", "MemAvailable", avail, sizeof avail);
  double t = strtod(total, NULL) * 1024, a = strtod(avail, NULL) * 1024;
  double limit = cgroup_limit("memory.max");
  report_json_begin("memory", 0);
  report_json_num("total_bytes", t);
  report_json_num("available_bytes", a);
  if (limit > 0) {
    report_json_num("cgroup_limit_bytes", limit);
  }
  report_json_end();
  char l[64] = "";
  if (limit > 0) {
    snprintf(l, sizeof l, ", cgroup limit %.1f GiB", limit / GIB);
  }
  report_line("memory", "%.1f GiB total, %.1f GiB available%s", t / GIB, a / GIB, l);
}

void probe_network(void) {
  struct tutti_iface cand[32];
  int ncand = tutti_iface_list(cand, 32);
  ncand = ncand > 32 ? 32 : ncand;
  struct tutti_iface pick;
  ncclResult_t picked = tutti_iface_pick(&pick);
  const char* spec = tutti_getenv("NCCL_SOCKET_IFNAME");
  struct ifaddrs* all = NULL;
  report_json_begin("network", 0);
  report_json_str("NCCL_SOCKET_IFNAME", spec ? spec : "");
  report_json_str("chosen", picked == ncclSuccess ? pick.name : "");
  report_json_begin("interfaces", 1);
  if (getifaddrs(&all) == 0) {
    for (struct ifaddrs* i = all; i != NULL; i = i->ifa_next) {
      if (i->ifa_addr == NULL ||
          (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) {
        continue;
      }
      char addr[INET6_ADDRSTRLEN] = "?";
      const void* raw = i->ifa_addr->sa_family == AF_INET
                            ? (const void*)&((struct sockaddr_in*)i->ifa_addr)->sin_addr
                            : (const void*)&((struct sockaddr_in6*)i->ifa_addr)->sin6_addr;
      inet_ntop(i->ifa_addr->sa_family, raw, addr, sizeof addr);
      int usable = 0;
      for (int c = 0; c < ncand; c++) {
        usable |= strcmp(cand[c].name, i->ifa_name) == 0;
      }
      int chosen = picked == ncclSuccess && strcmp(pick.name, i->ifa_name) == 0 &&
                   pick.addr.sa.sa_family == i->ifa_addr->sa_family;
      const int up = (i->ifa_flags & IFF_UP) != 0;
      report_json_item();
      report_json_str("name", i->ifa_name);
      report_json_str("address", addr);
      report_json_bool("up", up);
      report_json_bool("candidate", usable);
      report_json_bool("chosen", chosen);
      report_line(chosen ? "network *" : "network", "%-10s %-28s %s%s", i->ifa_name, addr,
                  up ? "up" : "down",
                  chosen   ? ", chosen by tutti"
                  : usable ? ", usable"
                           : ", not used by tutti");
    }
    freeifaddrs(all);
  }
  report_json_end();
  report_json_end();
  if (picked != ncclSuccess) {
    report_check("network interface", CHECK_FAIL,
                 "bring an interface up, or name one with NCCL_SOCKET_IFNAME (for example "
                 "NCCL_SOCKET_IFNAME=eth0; =name for an exact match, ^name to exclude)",
                 "tutti finds no interface to use%s%s", spec ? " with NCCL_SOCKET_IFNAME=" : "",
                 spec ? spec : "");
    return;
  }
  char where[INET6_ADDRSTRLEN] = "?";
  inet_ntop(pick.addr.sa.sa_family,
            pick.addr.sa.sa_family == AF_INET ? (const void*)&pick.addr.sin.sin_addr
                                              : (const void*)&pick.addr.sin6.sin6_addr,
            where, sizeof where);
  report_check("network interface", CHECK_PASS, NULL, "tutti uses %s (%s)%s", pick.name, where,
               pick.loopback ? ": loopback only, so every rank must be on this host" : "");
}

void probe_shm(void) {
  const char* dir = check_opts.shm_dir;
  struct statvfs vfs;
  if (statvfs(dir, &vfs) != 0) {
    report_json_begin("shm", 0);
    report_json_str("path", dir);
    report_json_bool("exists", 0);
    report_json_end();
    report_check("shared memory", CHECK_FAIL, SHM_FIX,
                 "%s does not exist: ranks on one host cannot share memory", dir);
    return;
  }
  double size = (double)vfs.f_blocks * vfs.f_frsize, avail = (double)vfs.f_bavail * vfs.f_frsize;
  const char* fake = getenv("TUTTI_CHECK_SHM_BYTES"); /* tests: pretend this size */
  if (fake != NULL && *fake != '\0') {
    size = avail = strtod(fake, NULL);
  }
  report_json_begin("shm", 0);
  report_json_str("path", dir);
  report_json_bool("exists", 1);
  report_json_num("size_bytes", size);
  report_json_num("free_bytes", avail);
  report_json_end();
  if (size < (double)SHM_MIN_BYTES || avail < (double)SHM_MIN_BYTES) {
    report_check("shared memory", CHECK_FAIL, SHM_FIX,
                 "%s has %.0f MB, %.0f MB free: under 1 GB, so jobs with several ranks per host "
                 "or large NCCL_BUFFSIZE fail",
                 dir, size / (1 << 20), avail / (1 << 20));
    return;
  }
  report_check("shared memory", CHECK_PASS, NULL, "%s has %.1f GiB, %.1f GiB free", dir, size / GIB,
               avail / GIB);
}
