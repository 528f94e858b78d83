/* The networks tutti would use between hosts: the network plugin the
 * library loads (NCCL_NET_PLUGIN, or libnccl-net.so), its devices and
 * their properties, and tutti's own socket network, which carries GPU
 * buffers across hosts when no plugin is loaded. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "net/net.h"
#include "net/socket/socknet.h"
#include "util/param.h"

static void ptr_text(int ptr, char* buf, size_t len) {
  snprintf(buf, len, "%s%s%s", ptr & TUTTI_NET_PTR_HOST ? "host" : "",
           ptr & TUTTI_NET_PTR_CUDA ? (ptr & TUTTI_NET_PTR_HOST ? "+CUDA" : "CUDA") : "",
           ptr & TUTTI_NET_PTR_DMABUF ? "+dmabuf" : "");
}

/* Every device of `net`, as lines and JSON items of the open section. */
static int list_devices(struct tutti_net* net, const char* section) {
  int ndev = 0;
  if (net->ops->devices(net, &ndev) != ncclSuccess) {
    return -1;
  }
  report_json_begin("devices", 1);
  for (int d = 0; d < ndev; d++) {
    struct tutti_net_props p;
    if (net->ops->props(net, d, &p) != ncclSuccess) {
      continue;
    }
    char ptr[32];
    ptr_text(p.ptr_support, ptr, sizeof ptr);
    report_json_item();
    report_json_int("index", d);
    report_json_str("name", p.name);
    report_json_str("pci_path", p.pci_path);
    report_json_int("speed_mbps", p.speed);
    report_json_num("latency_us", p.latency);
    report_json_str("pointers", ptr);
    report_json_int("max_comms", p.max_comms);
    report_json_int("max_recvs", p.max_recvs);
    report_json_bool("reg_is_global", p.reg_is_global);
    report_json_num("max_p2p_bytes", (double)p.max_p2p_bytes);
    report_json_bool("host_driven", p.dev_type == 0);
    report_line(section,
                "device %d: %s, %d Mb/s, latency %.1f us, %s memory, %d comms, %d grouped "
                "receives%s%s",
                d, p.name, p.speed, p.latency, ptr, p.max_comms, p.max_recvs,
                p.reg_is_global ? ", global registrations" : "",
                p.dev_type != 0 ? ", device offload (not used by tutti)" : "");
  }
  report_json_end();
  return ndev;
}

void probe_net_plugin(void) {
  const char* named = tutti_getenv("NCCL_NET_PLUGIN");
  struct tutti_net* net = NULL;
  ncclResult_t res = tutti_net_open(0x7475747469636b31ull, &net); /* a check's own id */
  report_json_begin("net_plugin", 0);
  report_json_str("NCCL_NET_PLUGIN", named != NULL ? named : "");
  report_json_bool("loaded", net != NULL);
  if (net != NULL) {
    report_json_str("name", net->name);
    report_json_str("path", net->path);
    report_json_int("abi", net->abi);
    report_line("net plugin", "%s (ncclNetPlugin_v%d) from %s", net->name, net->abi, net->path);
    const int ndev = list_devices(net, "net plugin");
    report_json_end();
    char name[sizeof net->name];
    snprintf(name, sizeof name, "%s", net->name);
    tutti_net_close(net);
    if (ndev <= 0) {
      report_check("network plugin", CHECK_FAIL,
                   "check the plugin's own requirements (its NICs, drivers, libraries), or set "
                   "NCCL_NET_PLUGIN=none to use tutti's TCP transport",
                   "%s loads but offers no device", name);
    } else {
      report_check("network plugin", CHECK_PASS, NULL,
                   "%s carries traffic between hosts (%d devices)", name, ndev);
    }
    return;
  }
  report_json_end();
  if (res != ncclSuccess) {
    report_check("network plugin", CHECK_FAIL,
                 "fix the plugin NCCL_NET_PLUGIN names (its log says why), or unset "
                 "NCCL_NET_PLUGIN (none: tutti's own transports)",
                 "NCCL_NET_PLUGIN=%s cannot be used: %s", named != NULL ? named : "",
                 ncclGetLastError(NULL));
    return;
  }
  report_line("net plugin", "none%s: tutti's own TCP transport and socket network",
              named != NULL && named[0] != '\0' ? " loads (see the warning above)" : "");
  struct tutti_net* own = NULL;
  if (tutti_socknet_open(0x7475747469636b32ull, &own) == ncclSuccess && own != NULL) {
    report_json_begin("socket_network", 0);
    list_devices(own, "socket net");
    report_json_end();
    tutti_net_close(own);
  }
}
