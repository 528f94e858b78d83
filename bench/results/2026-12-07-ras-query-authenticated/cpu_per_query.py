"""CPU time the job's processes spend per RAS query, before (56ddc3b: the
secret sent, TCP client port) and after (HMAC proof, Unix socket): a 2-rank
job idle after its calls, queried N times in a row; process CPU from
/proc/PID/schedstat (the ranks sleep, so it is the listeners')."""
import os, socket, statistics, subprocess, sys, tempfile, time

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]

def one(build, new, n):
    run = tempfile.mkdtemp()
    env = dict(os.environ, XDG_RUNTIME_DIR=run, NCCL_COMM_ID="127.0.0.1:%d" % free_port(),
               RAS_AFTER="60", RAS_HOLD="60")
    if not new:
        env["NCCL_RAS_ADDR"] = "127.0.0.1:%d" % free_port()
    procs = [subprocess.Popen([build + "/tests/ras_job", str(r), "2", "stall"], env=env,
                              stdout=subprocess.DEVNULL) for r in range(2)]
    time.sleep(1.5)
    cpu = lambda: sum(int(open("/proc/%d/task/%s/schedstat" % (p.pid, t)).read().split()[0])
                      for p in procs for t in os.listdir("/proc/%d/task" % p.pid))
    c0, t0 = cpu(), time.time()
    for _ in range(n):
        if new:
            s = socket.socket(socket.AF_UNIX); s.connect(os.path.join(run, "tutti", "ras.sock"))
            s.sendall(b"tRAC")
        else:
            h, p = env["NCCL_RAS_ADDR"].rsplit(":", 1)
            s = socket.create_connection((h, int(p)))
        got = b""
        while True:
            c = s.recv(65536)
            if not c: break
            got += c
        s.close()
        assert got.startswith(b"{") and b'"size":2' in got, got[:200]
    res = ((time.time() - t0) / n * 1e6, (cpu() - c0) / n / 1e3)
    for p in procs: p.kill(); p.wait()
    return res

n, rounds = int(sys.argv[1]), int(sys.argv[2])
old, new = [], []
print("date: %s  host: %s  cpus: %d; %d rounds of %d queries" % (
    time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), socket.gethostname(), os.cpu_count(), rounds, n))
for r in range(rounds):
    old.append(one(sys.argv[3], False, n)); new.append(one(sys.argv[4], True, n))
    print("round %d: before %.0f us wall, %.0f us CPU; after %.0f us wall, %.0f us CPU" % (r + 1, *old[-1], *new[-1]), flush=True)
for name, xs in (("before", old), ("after", new)):
    print("%s: median %.0f us wall (%.0f-%.0f), %.0f us CPU (%.0f-%.0f) per query" % (
        name, statistics.median(x[0] for x in xs), min(x[0] for x in xs), max(x[0] for x in xs),
        statistics.median(x[1] for x in xs), min(x[1] for x in xs), max(x[1] for x in xs)))
