"""What RAS's attack tests (ras_attack.py) share: the job's secret as
TUTTI_JOB_SECRET makes it, the peer protocol spoken as a process of the
job (ras/internal.h), a program squatting on a port, and jobs whose peer
ports are read from their logs."""
import glob
import hashlib
import hmac
import json
import os
import re
import socket
import struct
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ras_test import Job, ask_socket, comm_of, fail  # noqa: E402

JOB_SECRET = "ras-attack-test-job"
M64 = (1 << 64) - 1


def hash16(s):
    """The job secret an NCCL_COMM_ID id gets from TUTTI_JOB_SECRET
    (src/bootstrap/uid.c); checked against a live rank before any attack."""
    out = b""
    for k, h in enumerate((0xcbf29ce484222325, 0x84222325cbf29ce4)):
        for c in s.encode():
            h = ((h ^ c) * 0x100000001b3) & M64
        z = (h + 0x9e3779b97f4a7c15 * (k + 1)) & M64
        z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M64
        z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M64
        out += (z ^ (z >> 31)).to_bytes(8, "little")
    return out


SECRET = hash16(JOB_SECRET)


def packed(port, host="127.0.0.1"):
    """An address as the peer table carries it (util/socket.c)."""
    return bytes([0, 4]) + struct.pack(">H", port) + bytes(4) + socket.inet_aton(host) + bytes(12)


def mac(label, comm, port, asker, answerer):
    msg = label + b"\0" + struct.pack(">Q", comm) + packed(port) + asker + answerer
    return hmac.new(SECRET, msg, hashlib.sha256).digest()


def recv_exact(s, n):
    got = b""
    while len(got) < n:
        chunk = s.recv(n - len(got))
        if not chunk:
            break
        got += chunk
    return got


def recv_all(s):
    got = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return got
        got += chunk


def peer_ask(port, comm, secret_ok=True, their_mac=None):
    """Asks the peer port as a process of the job does; returns its lines
    (b"" when it answers none). With secret_ok False, sends `their_mac`."""
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        asker = os.urandom(16)
        s.sendall(b"tRA2" + struct.pack(">Q", comm) + asker)
        chal = recv_exact(s, 52)
        if len(chal) != 52 or chal[:4] != b"tRA2":
            return b""
        answerer = chal[4:20]
        if secret_ok and chal[20:] != mac(b"tutti ras v2 answerer", comm, port, asker, answerer):
            fail("the peer at port %d proved a different secret" % port)
        s.sendall(mac(b"tutti ras v2 asker", comm, port, asker, answerer) if secret_ok
                  else their_mac)
        return recv_all(s)


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def listener_cpu(procs):
    """CPU seconds the ranks' RAS listener threads (named tutti-ras) spent."""
    total = 0
    for p in procs:
        for tid in os.listdir("/proc/%d/task" % p.pid):
            base = "/proc/%d/task/%s/" % (p.pid, tid)
            try:
                if open(base + "comm").read().strip() == "tutti-ras":
                    total += int(open(base + "schedstat").read().split()[0])
            except OSError:
                pass
    return total / 1e9


def peer_ports(logdir, procs):
    """Each rank's peer port, from its process's log (NCCL_DEBUG_SUBSYS=RAS)."""
    ports = {}
    deadline = time.time() + 10
    for r, p in enumerate(procs):
        while r not in ports and time.time() < deadline:
            for path in glob.glob(os.path.join(logdir, "log.%d" % p.pid)):
                m = re.search(r"RAS: peers at 127\.0\.0\.1:(\d+)", open(path).read())
                if m:
                    ports[r] = int(m.group(1))
            time.sleep(0.05)
    if len(ports) != len(procs):
        fail("no peer port logged for ranks %s" % sorted(set(range(len(procs))) - set(ports)))
    return ports


def logged_job(job, mode, extra=None):
    logdir = tempfile.mkdtemp(prefix="ras-log-")
    env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "RAS",
           "NCCL_DEBUG_FILE": os.path.join(logdir, "log.%p"), "TUTTI_JOB_SECRET": JOB_SECRET,
           "TUTTI_RECORD_DIR": tempfile.mkdtemp(prefix="ras-rec-")}
    env.update(extra or {})
    j = Job(job, mode, 4, env)
    return j, logdir, peer_ports(logdir, j.procs)


def answered(j, tool, within=1.0):
    """The job's answer on its socket (timed) and tutti-ras's verdicts."""
    t0 = time.time()
    raw = ask_socket(j.env)
    took = time.time() - t0
    try:
        doc = json.loads(raw)
    except ValueError:
        fail("the job's answer is not JSON: %r" % raw[:300])
    if took > within:
        fail("the job answered in %.2f s (at most %.1f)" % (took, within), doc)
    full, _ = j.ask(tool)
    return doc, full, took


def check_dead_job(doc, marker=None):
    c = comm_of(doc, 4)
    if len(doc["communicators"]) != 1:
        fail("only the job's communicator may be listed", doc)
    states = [r["state"] for r in c["ranks"]]
    if states[3] != "dead" or any(s in ("dead", "unreachable") for s in states[:3]):
        fail("ranks 0-2 answer, rank 3 is dead: %s" % states, doc)
    if marker is not None and marker in json.dumps(doc):
        fail("a forged field reached the document", doc)
    return c


class Fake(threading.Thread):
    """A program listening on a dead rank's peer port. answer(conn, req)
    plays its part; every byte received is kept."""

    def __init__(self, port, answer):
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        self.port, self.answer, self.got, self.conns = port, answer, [], 0
        self.start()

    def run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns += 1
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        c.settimeout(2)
        rec = {"req": b"", "after": b""}
        self.got.append(rec)
        try:
            rec["req"] = recv_exact(c, 28)
            if len(rec["req"]) == 28:
                self.answer(self, c, rec)
        except OSError:
            pass
        finally:
            c.close()


def dead_job(job):
    # Under AddressSanitizer freed memory waits in a quarantine: kept small,
    # the serving process's size still says what RAS holds.
    asan = os.environ.get("ASAN_OPTIONS", "")
    j, logdir, ports = logged_job(job, "dead", {
        "ASAN_OPTIONS": (asan + ":" if asan else "") + "quarantine_size_mb=1"})
    for r in range(3):
        if "flight record" not in j.line(r):
            fail("rank %d did not fail on rank 3's death" % r)
    time.sleep(1.5)  # whoever served clients may have been rank 3
    return j, ports
