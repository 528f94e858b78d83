#!/usr/bin/env python3
"""What RAS queries cost a running job: allreduce busbw of tutti-perf (2
processes under tuttirun) with and without a client asking the job
QPS times a second (its Unix socket in the user's private directory, the
request sent and the whole document read, as tutti-ras does; the asked
process proves the secret to the other and reads its answer), and, as a
control, with the same client asking a stand-in server in another process
(a 24 KB answer, nothing of the job): what any such load costs on these
cores. Also the CPU time the job's RAS listener threads (named tutti-ras,
read from /proc) spent per query, which this machine's noise does not blur. The three take turns REPS times. Prints
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
limit = float(os.environ.get("BENCH_LIMIT", "1800"))  # seconds one run may take


def label(queries):
    return {False: "without queries", True: "with RAS queries", "standin": "with stand-in queries"}[
        queries]


def listener_ticks(launcher, seen):
    """CPU time of the RAS listener threads of the launcher's ranks, the
    most seen of each (a thread's time is gone once its rank exits)."""
    for pid in os.listdir("/proc"):
        try:
            if not pid.isdigit() or int(open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1]
                                        .split()[1]) != launcher:
                continue
            for tid in os.listdir("/proc/%s/task" % pid):
                base = "/proc/%s/task/%s/" % (pid, tid)
                if open(base + "comm").read().strip() == "tutti-ras":
                    # schedstat: ns on a CPU, exact (stat's ticks are sampled
                    # at the tick its poll timeouts wake on).
                    ns = int(open(base + "schedstat").read().split()[0])
                    seen[tid] = max(seen.get(tid, 0), ns)
        except (OSError, ValueError, IndexError):
            pass


def sample(launcher, stop, ticks):
    while not stop.wait(0.2):
        listener_ticks(launcher, ticks)


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
    stop, stats, ticks = threading.Event(), [], {}
    t0 = time.time()
    try:
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as e:
        sys.exit(f"ras_query_cost: FAILED: run {label(queries)}: could not start {cmd[0]}: {e}")
    threads = [threading.Thread(target=sample, args=(p.pid, stop, ticks))]
    if queries:
        time.sleep(0.5)  # the job's listener is up
        threads.append(threading.Thread(target=ask, args=(path, stop, stats)))
    for t in threads:
        t.start()
    try:
        out = p.communicate(timeout=limit)[0]
    except subprocess.TimeoutExpired:
        p.kill()
        out = (p.communicate()[0] or "") + f"\ntimed out after {limit:g} s"
    took = time.time() - t0
    stop.set()
    for t in threads:
        t.join()
    if standin:
        standin.kill()
        standin.wait()
    shutil.rmtree(run_dir, ignore_errors=True)
    m = re.search(r"Avg bus bandwidth\s*:\s*([0-9.]+)", out)
    if not m or p.returncode != 0:
        return None, f"exited with {p.returncode}: " + out
    # The listeners' CPU seconds per second of the run.
    return float(m.group(1)), (stats, sum(ticks.values()) / 1e9 / took, took)


def run_again(queries):
    """A run, made again when the job could not start (another tenant's job
    took the port its launcher picked)."""
    for _ in range(3):
        busbw, stats = run(queries)
        if busbw is not None:
            return busbw, stats
        print(f"run {label(queries)} failed, made again:\n" + stats[-600:])
    sys.exit(f"ras_query_cost: FAILED: run {label(queries)} failed three times (no 'Avg bus "
             f"bandwidth' line, or a non-zero exit); its last words:\n" + stats[-600:])


print("date: %s  host: %s  cpus: %d" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                        socket.gethostname(), os.cpu_count()))
print("allreduce %s, 2 processes, %s iterations; queries: %g a second" % (size, iters, qps))
ratios, controls, per_query = [], [], []
for rep in range(reps):
    off, (_, idle_cpu, _) = run_again(False)
    on, (stats, cpu, took) = run_again(True)
    ctl, (cstats, _, _) = run_again("standin")
    lat = statistics.median(s[0] for s in stats) * 1000 if stats else float("nan")
    nbytes = stats[0][1] if stats else 0
    ratios.append(on / off)
    controls.append(ctl / off)
    # What the queries added to the listeners' CPU time, per query.
    if stats:
        per_query.append((cpu - idle_cpu) * took / len(stats) * 1e6)
    print("rep %d: busbw without %.3f GB/s, with %.3f GB/s (%d queries, median answer %.2f ms, "
          "%d bytes), stand-in %.3f GB/s (%d queries): ratios %.3f, %.3f; listeners' CPU "
          "%.2f %% of a core idle, %.2f %% with queries" %
          (rep + 1, off, on, len(stats), lat, nbytes, ctl, len(cstats), on / off, ctl / off,
           idle_cpu * 100, cpu * 100))
print("median ratio with RAS queries / without: %.3f (min %.3f, max %.3f)" %
      (statistics.median(ratios), min(ratios), max(ratios)))
print("median ratio with stand-in queries / without: %.3f (min %.3f, max %.3f)" %
      (statistics.median(controls), min(controls), max(controls)))
if per_query:
    print("listeners' CPU per query, both processes: median %.0f us (min %.0f, max %.0f): "
          "%.2f %% of a core at %g queries a second" %
          (statistics.median(per_query), min(per_query), max(per_query),
           statistics.median(per_query) * qps / 1e4, qps))
