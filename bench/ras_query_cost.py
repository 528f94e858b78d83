#!/usr/bin/env python3
"""What RAS queries cost a running job: allreduce busbw of tutti-perf (2
processes under tuttirun) with and without a client asking the job
QPS times a second (its Unix socket in the user's private directory, the
request sent and the whole document read, as tutti-ras does; the asked
process proves the secret to the other and reads its answer), and, as a
control, with the same client asking a stand-in server in another process
(a 24 KB answer, nothing of the job): what any such load costs on these
cores. The three take turns REPS times. Prints
every run and the median ratios to the run without queries.
Usage: ras_query_cost.py BUILD_DIR [SIZE [ITERS [REPS [QPS]]]]"""
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

build = sys.argv[1]
size = sys.argv[2] if len(sys.argv) > 2 else "64K"
iters = sys.argv[3] if len(sys.argv) > 3 else "30000"
reps = int(sys.argv[4]) if len(sys.argv) > 4 else 5
qps = float(sys.argv[5]) if len(sys.argv) > 5 else 64


def ask(path, stop, stats):
    period = 1.0 / qps
    nxt = time.time()
    while not stop.is_set():
        try:
            t0 = time.time()
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(2)
                s.connect(path)
                s.sendall(b"tRAC")
                got = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    got += chunk
            if got.startswith(b"{") and b"communicators" in got:
                stats.append((time.time() - t0, len(got)))
        except OSError:
            pass
        nxt += period
        time.sleep(max(0.0, nxt - time.time()))


STANDIN = r"""
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(64)
doc = b"{" + b"x" * 24000 + b"communicators}"
while True:
    c, _ = s.accept(); c.recv(4); c.sendall(doc); c.close()
"""


def run(queries):
    run_dir = tempfile.mkdtemp(prefix="ras-bench-")
    env = dict(os.environ, XDG_RUNTIME_DIR=run_dir)
    env.pop("NCCL_RAS_ADDR", None)
    path = os.path.join(run_dir, "tutti", "ras.sock")
    standin = None
    if queries == "standin":
        path = os.path.join(run_dir, "standin.sock")
        standin = subprocess.Popen([sys.executable, "-c", STANDIN, path])
    cmd = [build + "/tools/tuttirun/tuttirun", "-n", "2", build + "/tools/tutti-perf/tutti-perf",
           "allreduce", "-b", size, "-e", size, "-n", iters, "-w", "500"]
    stop, stats = threading.Event(), []
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t = None
    if queries:
        time.sleep(0.5)  # the job's listener is up
        t = threading.Thread(target=ask, args=(path, stop, stats))
        t.start()
    out = p.communicate()[0]
    stop.set()
    if t:
        t.join()
    if standin:
        standin.kill()
        standin.wait()
    shutil.rmtree(run_dir, ignore_errors=True)
    m = re.search(r"Avg bus bandwidth\s*:\s*([0-9.]+)", out)
    if not m:
        return None, out
    return float(m.group(1)), stats


def run_again(queries):
    """A run, made again when the job could not start (another tenant's job
    took the port its launcher picked)."""
    for _ in range(3):
        busbw, stats = run(queries)
        if busbw is not None:
            return busbw, stats
        print("a run failed, made again:\n" + stats[-600:])
    sys.exit("three runs failed")


print("date: %s  host: %s  cpus: %d" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                        socket.gethostname(), os.cpu_count()))
print("allreduce %s, 2 processes, %s iterations; queries: %g a second" % (size, iters, qps))
ratios, controls = [], []
for rep in range(reps):
    off, _ = run_again(False)
    on, stats = run_again(True)
    ctl, cstats = run_again("standin")
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
