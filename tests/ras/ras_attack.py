#!/usr/bin/env python3
"""RAS against a hostile neighbour (docs/ras.md, "The listener"): each case
runs a 4-process job and attacks it as another program on the same host
would, then checks that the attack failed and that the job and its listener
still answer right, within 1 s.
Usage: ras_attack.py RAS_JOB TUTTI_RAS CASE, CASE one of
  squat         a program on a dead rank's peer port: what it receives,
                relays and replays
  forged_size   a peer that holds the secret answers size 10,000,000 and
                20 MB in one line
  forged_lines  the same peer answers 300,000 distinct lines, then hostile
                lines within the bounds
  idle          20 silent connections to each peer port and to the socket
  symlink       links planted at the flight records' paths and as the
                private directory
  other_user    another uid's client (skipped, 77, where none can be made)
  encrypted     a job with ncclSetEncryption's key: tutti-ras with the key,
                without it, with a wrong one"""
import glob
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ras_test import Job, comm_of, fail, free_port  # noqa: E402
from ras_peer import (SECRET, Fake, answered, check_dead_job, dead_job, listener_cpu,  # noqa: E402
                      logged_job, mac, peer_ask, recv_all, recv_exact, rss_kb)


def squat(job, tool):
    j, ports = dead_job(job)
    try:
        doc, _, _ = answered(j, tool)
        comm = int(comm_of(doc, 4)["hash"], 16)
        if not peer_ask(ports[0], comm):
            fail("a live rank did not answer the test's own, proper, request")

        def relay(fake, c, rec):
            # Forward the asker's request to a live rank and its challenge
            # back: the asker must see the MAC is not for the address it dialed.
            with socket.create_connection(("127.0.0.1", ports[0]), timeout=2) as live:
                live.sendall(rec["req"])
                c.sendall(recv_exact(live, 52))
                c.settimeout(0.5)
                try:
                    rec["after"] = recv_all(c)
                except OSError:
                    pass
        fake = Fake(ports[3], relay)
        doc, full, took = answered(j, tool)
        check_dead_job(full)
        if not fake.got:
            fail("nobody asked the dead rank's port: the attack proves nothing")
        for rec in fake.got:
            if len(rec["req"]) != 28 or rec["req"][:4] != b"tRA2" or SECRET in rec["req"]:
                fail("the squatter received more than a request: %r" % rec["req"])
            if rec["after"]:
                fail("the asker answered a relayed challenge: %r" % rec["after"])
        # What it recorded, replayed to a live rank, gets a challenge only.
        for rec in fake.got[:2]:
            with socket.create_connection(("127.0.0.1", ports[1]), timeout=3) as s:
                s.sendall(rec["req"])
                if len(recv_exact(s, 52)) != 52:
                    fail("a live rank did not challenge a replayed request")
                s.sendall(os.urandom(32))
                if recv_all(s):
                    fail("a live rank answered a request without the secret's MAC")
        if not peer_ask(ports[2], comm) or not peer_ask(ports[0], comm):
            fail("the live ranks no longer answer their peers")
        answered(j, tool)
        print("ok: the squatter got %d bare requests (no secret, no MAC), its relay and "
              "replays were refused; the job answered in %.3f s" % (len(fake.got), took))
    finally:
        j.stop()


def forged(job, tool, case):
    j, ports = dead_job(job)
    try:
        doc, _, _ = answered(j, tool)
        comm = int(comm_of(doc, 4)["hash"], 16)
        if not peer_ask(ports[0], comm):
            fail("the test's secret is not the job's: it cannot play a peer that holds it")
        server = doc["from_pid"]
        before = rss_kb(server)
        obj = '{"rank":3,"host":"x","state":"idle","forged":"FORGED"}'
        if case == "forged_size":
            body = ("%016x 10000000 init %s\n" % (comm, obj) +
                    "%016x 10000000 init %s\n" % (comm ^ 1, obj)).encode()
            bodies = [body, b"%016x 4 init " % comm + b"x" * (20 << 20) + b"\n"]
        else:
            many = "".join("%016x 4 init %s\n" % (comm ^ (i + 1), obj) for i in range(300000))
            hostile = "".join([
                "%016x 4 init %s\n" % (comm, obj.replace('"rank":3', '"rank":0')),  # not its rank
                '%016x 4 init","x":"y {"rank":3}\n' % comm,                     # unescaped made
                '%016x 4 init {"rank":3}]}],"x":[{"a":1}\n' % comm,             # breaks out
                '%016x 4 init {"rank":7,"forged":"FORGED"}\n' % comm,           # beyond size
                "%016x 5 init %s\n" % (comm, obj),                               # another size
            ])
            bodies = [many.encode(), hostile.encode()]
        which = {"n": 0}

        def answer(fake, c, rec):
            asker = rec["req"][12:28]
            answerer = os.urandom(16)
            c.sendall(b"tRA2" + answerer + mac(b"tutti ras v2 answerer", comm, fake.port, asker,
                                               answerer))
            rec["after"] = recv_exact(c, 32)
            body = bodies[min(which["n"], len(bodies) - 1)]
            which["n"] += 1
            try:
                c.sendall(body)
            except OSError:
                rec["cut"] = True  # the asker stopped reading: what a bound does
        fake = Fake(ports[3], answer)
        worst = 0.0
        for _ in bodies:
            doc, full, took = answered(j, tool)
            worst = max(worst, took)
            check_dead_job(doc, "FORGED")
            check_dead_job(full, "FORGED")
        after = rss_kb(server)
        if fake.conns < len(bodies):
            fail("the forger was asked %d times, not %d" % (fake.conns, len(bodies)))
        if after - before > 64 * 1024:
            fail("the serving process grew from %d to %d KB" % (before, after))
        answered(j, tool)
        print("ok: %s refused: answers within %.3f s, the serving process %d -> %d KB" %
              (case, worst, before, after))
    finally:
        j.stop()


def idle(job, tool):
    j, logdir, ports = logged_job(job, "stall")
    held, stop = [], threading.Event()

    def keep_open():
        # 20 silent connections to each peer port and to the socket, made
        # again as the job drops them.
        path = os.path.join(j.env["XDG_RUNTIME_DIR"], "tutti", "ras.sock")
        while not stop.is_set():
            while len(held) < 20 * 5:
                try:
                    for port in ports.values():
                        held.append(socket.create_connection(("127.0.0.1", port), timeout=1))
                    u = socket.socket(socket.AF_UNIX)
                    u.connect(path)
                    held.append(u)
                except OSError:
                    break
            for s in list(held):
                try:
                    s.setblocking(False)
                    if s.recv(1) == b"":
                        held.remove(s)
                        s.close()
                except BlockingIOError:
                    pass
                except OSError:
                    held.remove(s)
                    s.close()
            time.sleep(0.05)
    t = threading.Thread(target=keep_open, daemon=True)
    try:
        time.sleep(2.0)
        t.start()
        time.sleep(0.5)
        worst = 0.0
        for _ in range(3):
            doc, full, took = answered(j, tool)
            worst = max(worst, took)
            states = [r["state"] for r in comm_of(doc, 4)["ranks"]]
            if states != ["waiting", "waiting", "idle", "waiting"]:
                fail("with silent connections open the ranks are %s" % states, doc)
        print("ok: %d silent connections held; every rank answered, within %.3f s" %
              (len(held), worst))
    finally:
        stop.set()
        t.join()
        j.stop()


def symlink(job, tool):
    # 1. TUTTI_RECORD_DIR shared with others (as /tmp is): links planted at
    #    each rank's name once the attacker read them from the job's answer.
    shared = tempfile.mkdtemp(prefix="ras-shared-")
    os.chmod(shared, 0o1777)
    victim = os.path.join(tempfile.mkdtemp(prefix="ras-victim-"), "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    j = Job(job, "stall", 4, {"TUTTI_TIMEOUT": "3", "TUTTI_RECORD_DIR": shared, "RAS_HOLD": "8"})
    try:
        time.sleep(1.0)
        doc, _ = j.ask(tool)
        c = comm_of(doc, 4)
        links = []
        for r in c["ranks"]:
            link = os.path.join(shared, "tutti-ras-%s-r%d-p%d.json" % (c["hash"], r["rank"],
                                                                    r["pid"]))
            os.symlink(victim, link)
            links.append(link)
        for r in (0, 1, 3):
            line = j.line(r)
            m = re.search(r"flight record: (\S+)", line)
            if m is None or m.group(1) in links:
                fail("rank %d's record should be beside the link: %s" % (r, line))
            st = os.lstat(m.group(1))
            if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != 0o600:
                fail("rank %d's record is not a regular file of mode 0600" % r)
        if open(victim).read() != "precious\n":
            fail("a flight record went through a planted link")
        time.sleep(1.0)
        records = [p for p in glob.glob(shared + "/tutti-ras-*.json") if not os.path.islink(p)]
        out = subprocess.run([tool, "--json", "--read"] + records, capture_output=True,
                             text=True, timeout=10)
        v = json.loads(out.stdout)["verdicts"]
        if len(records) != 4 or v[0]["kind"] != "stalled" or v[0]["ranks"] != [2]:
            fail("the 4 records beside the links should name rank 2: %s" % records, v)
    finally:
        j.stop()
    # 2. The private directory itself planted as a link to the attacker's.
    tmp, theirs = tempfile.mkdtemp(prefix="ras-tmp-"), tempfile.mkdtemp(prefix="ras-theirs-")
    os.symlink(theirs, os.path.join(tmp, "tutti-%d" % os.geteuid()))
    logdir = tempfile.mkdtemp(prefix="ras-log-")
    j = Job(job, "stall", 4, {"TUTTI_TIMEOUT": "3", "TMPDIR": tmp, "RAS_HOLD": "8",
                              "NCCL_DEBUG": "WARN", "XDG_RUNTIME_DIR": None,
                              "TUTTI_RECORD_DIR": None,
                              "NCCL_DEBUG_FILE": os.path.join(logdir, "log.%p")})
    try:
        for r in (0, 1, 3):
            line = j.line(r)
            if "TUTTI_TIMEOUT" not in line or "flight record" in line:
                fail("rank %d should fail on its timeout, with no record: %s" % (r, line))
        logs = "".join(open(p).read() for p in glob.glob(logdir + "/log.*"))
        if "is a symbolic link" not in logs:
            fail("no warning names the planted link:\n" + logs[-2000:])
        out = subprocess.run([tool], env=j.env, capture_output=True, text=True, timeout=10)
        if out.returncode != 1 or "symbolic link" not in out.stderr:
            fail("tutti-ras should refuse the linked directory: %s" % out.stderr)
        if os.listdir(theirs):
            fail("files landed in the attacker's directory: %s" % os.listdir(theirs))
    finally:
        j.stop()
    print("ok: records made beside 4 planted links (0600), the victim untouched; a linked "
          "private directory refused by the job and by tutti-ras")


def other_user(job, tool):
    nobody = 65534
    probe = subprocess.run(["setpriv", "--reuid=%d" % nobody, "--regid=%d" % nobody,
                            "--clear-groups", "true"], capture_output=True, text=True)
    if os.geteuid() != 0 or probe.returncode != 0:
        print("SKIPPED: no second uid here (not root, or setpriv failed: %s)" %
              probe.stderr.strip())
        sys.exit(77)
    as_nobody = ["setpriv", "--reuid=%d" % nobody, "--regid=%d" % nobody, "--clear-groups"]
    bindir = tempfile.mkdtemp(prefix="ras-tool-")
    os.chmod(bindir, 0o755)
    theirs = os.path.join(bindir, "tutti-ras")
    shutil.copy(tool, theirs)
    os.chmod(theirs, 0o755)
    j = Job(job, "stall", 4)
    try:
        time.sleep(2.0)
        private = os.path.join(j.env["XDG_RUNTIME_DIR"], "tutti")
        path = os.path.join(private, "ras.sock")
        os.chmod(j.env["XDG_RUNTIME_DIR"], 0o755)  # as /run/user/UID is
        env = {"PATH": os.environ.get("PATH", ""), "TMPDIR": bindir}
        out = subprocess.run(as_nobody + [theirs, "-a", path], env=env, capture_output=True,
                             text=True, timeout=10)
        if out.returncode != 1 or out.stdout:
            fail("another user read the job through its socket: %s" % out.stdout[:300])
        print("ok: another user's tutti-ras: " + out.stderr.strip())
        # Were the directory and the socket opened to all, the job still
        # answers only its own user (asked by a client of the attacker's own:
        # tutti-ras would refuse a socket served by another uid first).
        os.chmod(private, 0o755)
        os.chmod(path, 0o777)
        raw = ("import socket; s = socket.socket(socket.AF_UNIX); s.connect(%r); "
               "s.sendall(b'tRAC'); b = b''\nwhile True:\n c = s.recv(65536)\n if not c: break\n"
               " b += c\nprint(b.decode())" % path)
        out = subprocess.run(as_nobody + [sys.executable, "-c", raw], env=env,
                             capture_output=True, text=True, timeout=10)
        if "only its own user" not in out.stdout or "communicators" in out.stdout:
            fail("an opened socket answered another user: %s %s" % (out.stdout, out.stderr))
        print("ok: through an opened socket: " + out.stdout.strip())
        os.chmod(private, 0o700)
        doc, _, took = answered(j, tool)
        if [r["state"] for r in comm_of(doc, 4)["ranks"]] != ["waiting", "waiting", "idle",
                                                             "waiting"]:
            fail("the job's answer changed", doc)
        print("ok: its own user still gets the job's answer, in %.3f s" % took)
    finally:
        j.stop()


def encrypted(job, tool):
    if subprocess.run(["sh", "-c", "ldconfig -p | grep -q 'libcrypto\\.so\\.3 '"]).returncode:
        print("SKIPPED: no OpenSSL 3 (libcrypto.so.3) to encrypt with")
        sys.exit(77)
    key = "ras-attack-encryption-key-0123456789abcdef"
    keys = tempfile.mkdtemp(prefix="ras-key-")
    right, wrong = os.path.join(keys, "right"), os.path.join(keys, "wrong")
    for path, k in ((right, key), (wrong, key.upper())):
        with open(path, "w") as f:
            f.write(k + "\n")
    addr = "127.0.0.1:%d" % free_port()
    j = Job(job, "stall", 4, {"RAS_PSK": key, "NCCL_RAS_ADDR": addr})
    try:
        time.sleep(2.0)

        def ask(*args):
            t0 = time.time()
            out = subprocess.run([tool, "-a", addr] + list(args), capture_output=True,
                                 text=True, timeout=10)
            return out, time.time() - t0
        out, took = ask("--json", "--key-file", right)
        if out.returncode != 0:
            fail("tutti-ras with the key: rc %d: %s" % (out.returncode, out.stderr))
        doc = json.loads(out.stdout)
        if [r["state"] for r in comm_of(doc, 4)["ranks"]] != ["waiting", "waiting", "idle",
                                                             "waiting"] or took > 2.0:
            fail("with the key every rank answers, through encrypted peers (%.2f s)" % took, doc)
        print("ok: with the key: %s (%.2f s)" % (doc["verdicts"][0]["text"], took))
        out, _ = ask()
        if out.returncode != 1 or "encrypts its connections (ncclSetEncryption)" not in out.stderr:
            fail("without the key: rc %d: %s %s" % (out.returncode, out.stdout[:200], out.stderr))
        print("ok: without it: " + out.stderr.strip())
        out, _ = ask("--key-file", wrong)
        if out.returncode != 1 or "key" not in out.stderr or out.stdout:
            fail("with a wrong key: rc %d: %s %s" % (out.returncode, out.stdout[:200], out.stderr))
        print("ok: with a wrong one: " + out.stderr.strip().splitlines()[-1])
        # Clients that send part of their first bytes and stop: neither a
        # busy listener nor a slower answer.
        host, port = addr.rsplit(":", 1)
        partial = [socket.create_connection((host, int(port)), timeout=2) for _ in range(10)]
        for s in partial:
            s.sendall(b"t")
        cpu0, t0 = listener_cpu(j.procs), time.time()
        time.sleep(0.8)
        busy = (listener_cpu(j.procs) - cpu0) / (time.time() - t0)
        if busy > 0.2:
            fail("10 clients that sent one byte kept the listeners %.0f %% busy" % (busy * 100))
        out, took = ask("--json", "--key-file", right)
        if out.returncode != 0 or took > 2.0:
            fail("after the refusals the job no longer answers: %s" % out.stderr)
        print("ok: 10 clients stalled after one byte: listeners %.1f %% busy, the answer in "
              "%.2f s" % (busy * 100, took))
        for s in partial:
            s.close()
    finally:
        j.stop()


def main():
    job, tool, case = sys.argv[1:4]
    if case == "squat":
        squat(job, tool)
    elif case in ("forged_size", "forged_lines"):
        forged(job, tool, case)
    elif case == "idle":
        idle(job, tool)
    elif case == "symlink":
        symlink(job, tool)
    elif case == "other_user":
        other_user(job, tool)
    elif case == "encrypted":
        encrypted(job, tool)
    else:
        fail("unknown case " + case)
    print("PASS")


if __name__ == "__main__":
    main()
