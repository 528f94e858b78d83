/* Network interface selection (NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY):
 * the matching rule is a pure function so it can be tested on made-up names. */
#include "topo/ifaces.h"

#include <errno.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "util/check.h"
#include "util/param.h"

TUTTI_PARAM_STR(socket_ifname, "NCCL_SOCKET_IFNAME", NULL,
                "a comma list of name prefixes; a leading ^ leaves them out, = makes the names "
                "exact",
                "the interfaces bootstrap, TCP and the socket network use (unset: any that is up "
                "but docker, veth, virbr, br- and lo, loopback as a last resort)");
static TUTTI_PARAM_STR(socket_family, "NCCL_SOCKET_FAMILY", NULL,
                       "AF_INET (or 4), AF_INET6 (or 6); others are ignored with a warning",
                       "the address family of those interfaces (unset: either, IPv4 first)");

/* Names that look like an interface but rarely reach other hosts. */
static const char* const decoys[] = {"docker", "veth", "virbr", "br-", "lo"};

int tutti_iface_match(const char* spec, const char* name) {
  if (spec == NULL || *spec == '\0') {
    for (size_t i = 0; i < sizeof decoys / sizeof decoys[0]; i++) {
      if (strncmp(name, decoys[i], strlen(decoys[i])) == 0) {
        return 0;
      }
    }
    return 1;
  }
  int exclude = (*spec == '^');
  spec += exclude;
  int exact = (*spec == '=');
  spec += exact;
  int hit = 0;
  while (*spec != '\0' && !hit) {
    size_t len = strcspn(spec, ",");
    if (len > 0) {
      hit = exact ? (strlen(name) == len && strncmp(name, spec, len) == 0)
                  : strncmp(name, spec, len) == 0;
    }
    spec += len + (spec[len] == ',');
  }
  return exclude ? !hit : hit;
}

int tutti_iface_family(void) {
  const char* f = tutti_param_socket_family();
  if (f == NULL || *f == '\0') {
    return AF_UNSPEC;
  }
  if (strcasecmp(f, "AF_INET") == 0 || strcmp(f, "4") == 0) {
    return AF_INET;
  }
  if (strcasecmp(f, "AF_INET6") == 0 || strcmp(f, "6") == 0) {
    return AF_INET6;
  }
  WARN("NCCL_SOCKET_FAMILY=\"%s\" is neither AF_INET nor AF_INET6: ignored", f);
  return AF_UNSPEC;
}

/* Lower ranks first: IPv4, then IPv6; loopback after everything else. */
static int preference(const struct tutti_iface* i) {
  return (i->loopback ? 2 : 0) + (i->addr.sa.sa_family == AF_INET6 ? 1 : 0);
}

static int usable(const struct ifaddrs* ifa, int family) {
  if (ifa->ifa_addr == NULL || !(ifa->ifa_flags & IFF_UP)) {
    return 0;
  }
  int fam = ifa->ifa_addr->sa_family;
  if ((fam != AF_INET && fam != AF_INET6) || (family != AF_UNSPEC && fam != family)) {
    return 0;
  }
  /* A link-local IPv6 address needs a scope id that means nothing elsewhere. */
  const struct sockaddr_in6* s6 = (const struct sockaddr_in6*)ifa->ifa_addr;
  return !(fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr));
}

int tutti_iface_list(struct tutti_iface* out, int max) {
  struct ifaddrs* all = NULL;
  if (getifaddrs(&all) != 0) {
    return -1;
  }
  const char* spec = tutti_param_socket_ifname();
  int family = tutti_iface_family();
  int n = 0;
  /* Pass 1 takes loopback only when no rule was given and nothing else was found. */
  for (int pass = 0; pass < 2 && n == 0; pass++) {
    for (const struct ifaddrs* ifa = all; ifa != NULL; ifa = ifa->ifa_next) {
      if (!usable(ifa, family)) {
        continue;
      }
      int loop = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
      int ok = (spec != NULL && *spec != '\0')
                   ? (pass == 0 && tutti_iface_match(spec, ifa->ifa_name))
               : pass == 0 ? (!loop && tutti_iface_match(NULL, ifa->ifa_name))
                           : loop;
      if (!ok) {
        continue;
      }
      if (n < max) {
        struct tutti_iface* it = &out[n];
        memset(it, 0, sizeof *it);
        snprintf(it->name, sizeof it->name, "%s", ifa->ifa_name);
        memcpy(&it->addr, ifa->ifa_addr,
               ifa->ifa_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                    : sizeof(struct sockaddr_in));
        tutti_socket_set_port(&it->addr, 0);
        it->loopback = loop;
      }
      n++;
    }
  }
  freeifaddrs(all);
  /* Insertion sort: stable, and the lists are a handful of entries. */
  int m = n < max ? n : max;
  for (int i = 1; i < m; i++) {
    struct tutti_iface t = out[i];
    int j = i;
    for (; j > 0 && preference(&out[j - 1]) > preference(&t); j--) {
      out[j] = out[j - 1];
    }
    out[j] = t;
  }
  return n;
}

/* The names of every interface, for the sentence telling the user what exists. */
static void all_names(char* buf, size_t len) {
  struct ifaddrs* all = NULL;
  size_t o = 0;
  buf[0] = '\0';
  if (getifaddrs(&all) != 0) {
    return;
  }
  for (const struct ifaddrs* ifa = all; ifa != NULL && o + 1 < len; ifa = ifa->ifa_next) {
    if (!usable(ifa, AF_UNSPEC)) {
      continue;
    }
    const struct ifaddrs* first = all; /* an interface has one entry per address */
    while (!usable(first, AF_UNSPEC) || strcmp(first->ifa_name, ifa->ifa_name) != 0) {
      first = first->ifa_next;
    }
    if (first == ifa) {
      o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? ", " : "", ifa->ifa_name);
    }
  }
  freeifaddrs(all);
}

ncclResult_t tutti_iface_pick(struct tutti_iface* out) {
  struct tutti_iface list[32];
  int n = tutti_iface_list(list, 32);
  if (n < 0) {
    return tutti_error(ncclSystemError, "cannot list the network interfaces (getifaddrs): %s",
                       strerror(errno));
  }
  if (n == 0) {
    const char* spec = tutti_param_socket_ifname();
    const char* fam = tutti_param_socket_family();
    char names[256];
    all_names(names, sizeof names);
    return tutti_error(ncclSystemError,
                       "no usable network interface matches NCCL_SOCKET_IFNAME=\"%s\" "
                       "NCCL_SOCKET_FAMILY=\"%s\" (interfaces that are up here: %s): set "
                       "NCCL_SOCKET_IFNAME to one of them",
                       spec ? spec : "", fam ? fam : "", names[0] ? names : "none");
  }
  *out = list[0];
  char where[TUTTI_SOCKET_ADDR_STRLEN];
  INFO(TUTTI_INIT | TUTTI_NET, "using network interface %s (%s)", out->name,
       tutti_socket_format(&out->addr, where, sizeof where));
  return ncclSuccess;
}
