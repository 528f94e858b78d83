#!/usr/bin/env python3
"""What RAS queries cost a running job: allreduce busbw of tutti-perf (2
processes under tuttirun) with and without a client asking the job
QPS times a second (a socket to NCCL_RAS_ADDR, the whole document read, as
tutti-ras does), and, as a control, with the same client asking a stand-in
server in another process (a 24 KB answer, nothing of the job): what any
such load costs on these cores. The three take turns REPS times. Prints
every run and the median ratios to the run without queries.
Usage: ras_query_cost.py BUILD_DIR [SIZE [ITERS [REPS [QPS]]]]"""
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time

build = sys.argv[1]
size = sys.argv[2] if len(sys.argv) > 2 else "64K"
iters = sys.argv[3] if len(sys.argv) > 3 else "30000"
reps = int(sys.argv[4]) if len(sys.argv) > 4 else 5
qps = float(sys.argv[5]) if len(sys.argv) > 5 else 64


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ask(port, stop, stats):
    period = 1.0 / qps
    nxt = time.time()
    while not stop.is_set():
        try:
            t0 = time.time()
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                got = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    got += chunk
            if got.startswith(b"{"):
                stats.append((time.time() - t0, len(got)))
        except OSError:
            pass
        nxt += period
        time.sleep(max(0.0, nxt - time.time()))


STANDIN = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64)
doc = b"{" + b"x" * 24000 + b"}"
while True:
    c, _ = s.accept(); c.sendall(doc); c.close()
"""


def run(queries):
    port = free_port()
    env = dict(os.environ, NCCL_RAS_ADDR="127.0.0.1:%d" % port)
    standin = None
    if queries == "standin":
        qport = free_port()
        standin = subprocess.Popen([sys.executable, "-c", STANDIN, str(qport)])
    else:
        qport = port
    cmd = [build + "/tools/tuttirun/tuttirun", "-n", "2", build + "/tools/tutti-perf/tutti-perf",
           "allreduce", "-b", size, "-e", size, "-n", iters, "-w", "500"]
    stop, stats = threading.Event(), []
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t = None
    if queries:
        time.sleep(0.5)  # the job's listener is up
        t = threading.Thread(target=ask, args=(qport, stop, stats))
        t.start()
    out = p.communicate()[0]
    stop.set()
    if t:
        t.join()
    if standin:
        standin.kill()
        standin.wait()
    m = re.search(r"Avg bus bandwidth\s*:\s*([0-9.]+)", out)
    if not m:
        sys.exit("no busbw in:\n" + out)
    return float(m.group(1)), stats


print("date: %s  host: %s  cpus: %d" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                        socket.gethostname(), os.cpu_count()))
print("allreduce %s, 2 processes, %s iterations; queries: %g a second" % (size, iters, qps))
ratios, controls = [], []
for rep in range(reps):
    off, _ = run(False)
    on, stats = run(True)
    ctl, cstats = run("standin")
    lat = statistics.median(s[0] for s in stats) * 1000 if stats else float("nan")
    nbytes = stats[0][1] if stats else 0
    ratios.append(on / off)
    controls.append(ctl / off)
    print("rep %d: busbw without %.3f GB/s, with %.3f GB/s (%d queries, median answer %.2f ms, "
          "%d bytes), stand-in %.3f GB/s (%d queries): ratios %.3f, %.3f" %
          (rep + 1, off, on, len(stats), lat, nbytes, ctl, len(cstats), on / off, ctl / off))
print("median ratio with RAS queries / without: %.3f (min %.3f, max %.3f)" %
      (statistics.median(ratios), min(ratios), max(ratios)))
print("median ratio with stand-in queries / without: %.3f (min %.3f, max %.3f)" %
      (statistics.median(controls), min(controls), max(controls)))
