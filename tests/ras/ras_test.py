#!/usr/bin/env python3
"""RAS end to end (docs/ras.md): starts a job of ras_job processes on this
host, asks it with tutti-ras --json while it runs (or reads the flight
records its ranks wrote), and checks the verdicts and ranks' states.
Usage: ras_test.py RAS_JOB TUTTI_RAS stall|slow|dead|two|record|disabled|verdicts
       ras_test.py RAS_JOB TUTTI_RAS netns HOSTS_SH   (2 namespace hosts; 77: skipped)"""
import random
import glob
import json
import os
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fail(msg, doc=None):
    print("FAIL:", msg)
    if doc is not None:
        print(json.dumps(doc, indent=1)[:6000])
    sys.exit(1)


def private_env():
    """A private directory of the job's own (as $XDG_RUNTIME_DIR is), where
    its RAS socket goes: tests running at once do not meet."""
    run = tempfile.mkdtemp(prefix="ras-run-")
    env = dict(os.environ, XDG_RUNTIME_DIR=run)
    env.pop("NCCL_RAS_ADDR", None)
    return env


def ask_socket(env, req=b"tRAC"):
    """The job's own answer on its Unix socket (what tutti-ras reads)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(os.path.join(env["XDG_RUNTIME_DIR"], "tutti", "ras.sock"))
        s.sendall(req)
        raw = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return raw
            raw += chunk


class Job:
    def __init__(self, job, mode, n, env=None):
        self.env = private_env()
        self.env.update({"NCCL_COMM_ID": "127.0.0.1:%d" % free_port()})
        self.env.update(env or {})
        for k in [k for k, v in self.env.items() if v is None]:
            del self.env[k]  # None: unset
        self.procs = [subprocess.Popen([job, str(r), str(n), mode], env=self.env,
                                       stdout=subprocess.PIPE, text=True) for r in range(n)]

    def ask(self, tool):
        t0 = time.time()
        out = subprocess.run([tool, "--json"], env=self.env, capture_output=True, text=True,
                             timeout=10)
        took = time.time() - t0
        if out.returncode != 0:
            fail("tutti-ras --json: rc %d: %s" % (out.returncode, out.stderr))
        return json.loads(out.stdout), took

    def line(self, r, deadline=25):
        """The first line rank r prints."""
        return self.procs[r].stdout.readline().strip()

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()


def comm_of(doc, size):
    cs = [c for c in doc["communicators"] if c["size"] == size]
    if len(cs) != 1:
        fail("expected one communicator of %d ranks" % size, doc)
    return cs[0]


def verdicts(doc, kind):
    return [v for v in doc["verdicts"] if v["kind"] == kind]


def settled(doc):
    """A held-up job as a query should find it: a stalled verdict, no rank
    between entering its call and waiting, every wait half a second old."""
    ranks = [r for c in doc["communicators"] for r in c["ranks"]]
    return bool(verdicts(doc, "stalled")) and all(
        r["state"] != "in-call" and
        (r["state"] != "waiting" or r["current"]["waited_s"] >= 0.5) for r in ranks)


def ask_settled(job, tool, limit=15.0, ready=settled):
    """Asks until the answer is `ready` (on a loaded machine a rank may take
    a while to reach its wait, or to learn of a death), at most `limit`
    seconds; the last answer either way, for the checks to judge."""
    t0 = time.time()
    while True:
        doc, took = job.ask(tool)
        if ready(doc) or time.time() - t0 > limit:
            return doc, took
        time.sleep(0.5)


def rank3_dead(doc):
    """The dead case's answer once every survivor has learnt of rank 3."""
    cs = [c for c in doc["communicators"] if c["size"] == 4]
    return len(cs) == 1 and cs[0]["ranks"][3]["state"] == "dead" and bool(verdicts(doc, "dead"))


def check_stalled(doc, comm, holder, waiters, call):
    v = verdicts(doc, "stalled")
    if not v or v[0]["communicator"] != comm["hash"] or v[0]["ranks"] != [holder]:
        fail("no stalled verdict naming rank %d" % holder, doc)
    if doc["verdicts"][0]["kind"] != "stalled":
        fail("the stalled verdict is not first", doc)
    for r in comm["ranks"]:
        if r["rank"] == holder:
            if r["state"] != "idle" or r["calls"] != call - 1:
                fail("rank %d should be idle after %d calls" % (holder, call - 1), doc)
        elif r["rank"] in waiters:
            cur = r["current"]
            if r["state"] != "waiting" or cur["call"] != call or cur["op"] != "AllReduce":
                fail("rank %d should wait in call %d" % (r["rank"], call), doc)
            if not isinstance(cur["bytes_moved"], int) or cur["waited_s"] < 0.5:
                fail("rank %d: no bytes moved or wait given" % r["rank"], doc)
            if cur["waits_for"] != holder and cur["waits_for"] not in waiters:
                fail("rank %d waits for %s" % (r["rank"], cur["waits_for"]), doc)
    print("ok:", v[0]["text"])


def netns(job, tool, hosts_sh):
    """Ranks 0, 1 on host 0 and 2, 3 on host 1; the client asks host 0,
    whose process gathers host 1's ranks over the network."""
    env = dict(os.environ, TUTTI_NETNS_ID=str(random.randrange(1, 65536)))
    hosts = ["bash", hosts_sh]
    up = subprocess.run(hosts + ["up", "2"], env=env)
    if up.returncode == 77:
        sys.exit(77)
    procs = []
    try:
        if up.returncode != 0:
            fail("could not make 2 namespace hosts")
        addr0 = subprocess.run(hosts + ["addr", "0"], env=env, capture_output=True,
                               text=True).stdout.strip()
        env.update({"NCCL_COMM_ID": "%s:%d" % (addr0, random.randrange(20000, 60000)),
                    "NCCL_RAS_ADDR": "127.0.0.1:28028"})
        procs = [subprocess.Popen(hosts + ["run", str(r // 2), job, str(r), "4", "stall"],
                                  env=env, stdout=subprocess.DEVNULL) for r in range(4)]
        time.sleep(3.0)
        t0 = time.time()
        out = subprocess.run(hosts + ["run", "0", tool, "--json"], env=env, capture_output=True,
                             text=True, timeout=20)
        took = time.time() - t0
        if out.returncode != 0:
            fail("tutti-ras --json on host 0: rc %d: %s" % (out.returncode, out.stderr))
        doc = json.loads(out.stdout)
        c = comm_of(doc, 4)
        check_stalled(doc, c, 2, [0, 1, 3], 5)
        if c["ranks"][2]["host"] != c["ranks"][3]["host"] or \
                c["ranks"][2]["host"] == c["ranks"][0]["host"]:
            fail("ranks 2 and 3 should be on the other host", doc)
        print("ok: host 0 answered for both hosts in %.2f s" % took)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        subprocess.run(hosts + ["down"], env=env)


def verdicts_of_documents(tool):
    """The client alone, on documents written here: ranks all idle with
    calls 5, 5, 4, 5 (a GPU job's launches) are 'behind'; equal ones 'ok'."""
    d = tempfile.mkdtemp(prefix="ras-verdicts-")

    def doc(calls):
        ranks = [{"rank": r, "host": "h%d" % r, "pid": 100 + r, "gpu": r, "state": "idle",
                  "calls": c, "ops": c, "current": None, "failed": None, "dead": [],
                  "recent": []} for r, c in enumerate(calls)]
        return {"tutti_ras": 1, "time_ns": 0, "from_pid": 1, "reason": None,
                "communicators": [{"hash": "00000000000000ab", "size": len(calls),
                                   "made": "init", "ranks": ranks}]}
    for calls, kind, named in (([5, 5, 4, 5], "behind", [2]), ([5, 5, 5, 5], "ok", [])):
        path = os.path.join(d, "doc.json")
        with open(path, "w") as f:
            json.dump(doc(calls), f)
        out = subprocess.run([tool, "--json", "--read", path], capture_output=True, text=True,
                             timeout=10)
        got = json.loads(out.stdout)["verdicts"]
        if out.returncode != 0 or got[0]["kind"] != kind or got[0]["ranks"] != named:
            fail("calls %s: expected %s naming %s" % (calls, kind, named), got)
        print("ok:", got[0]["text"])
    bad = os.path.join(d, "bad.json")
    with open(bad, "w") as f:
        f.write('{"communicators": [')
    out = subprocess.run([tool, "--read", bad], capture_output=True, text=True, timeout=10)
    if out.returncode != 1 or "not a RAS document" not in out.stderr:
        fail("a broken document was not refused: rc %d" % out.returncode)


def main():
    job, tool, case = sys.argv[1:4]
    if case == "stall":
        j = Job(job, "stall", 4)
        try:
            time.sleep(2.0)  # the others are 1.5 s into the fifth call
            doc, took = ask_settled(j, tool)
            check_stalled(doc, comm_of(doc, 4), 2, [0, 1, 3], 5)
            # The job's answer itself, without the client's start: within 1 s.
            t0 = time.time()
            raw = ask_socket(j.env)
            asked = time.time() - t0
            again = json.loads(raw)
            if [r["state"] for r in comm_of(again, 4)["ranks"]] != \
                    ["waiting", "waiting", "idle", "waiting"]:
                fail("the job's own answer differs", again)
            # Bounds that a server blocked on the job would miss, with room
            # for a sanitizer build on busy cores (typically 0.01 and 0.2 s).
            if asked > 3.0 or took > 6.0:
                fail("the answer took %.2f s (tutti-ras: %.2f s)" % (asked, took))
            print("ok: the job answered in %.3f s (tutti-ras in %.2f s)" % (asked, took))
        finally:
            j.stop()
    elif case == "slow":
        j = Job(job, "slow", 4)
        try:
            for r in range(4):
                if j.line(r) != "rank %d: done" % r:
                    fail("rank %d did not finish" % r)
            doc, _ = j.ask(tool)
            v = verdicts(doc, "slow")
            if not v or v[0]["ranks"] != [1]:
                fail("no slow verdict naming rank 1", doc)
            if verdicts(doc, "stalled"):
                fail("a slow rank is not a stall", doc)
            print("ok:", v[0]["text"])
        finally:
            j.stop()
    elif case == "dead":
        d = tempfile.mkdtemp(prefix="ras-dead-")
        j = Job(job, "dead", 4, {"TUTTI_RECORD_DIR": d})
        try:
            for r in range(3):
                line = j.line(r)
                if "flight record: " + d not in line:
                    fail("rank %d's error names no flight record: %s" % (r, line))
            time.sleep(1.5)  # whoever served clients may have been rank 3
            doc, _ = ask_settled(j, tool, ready=rank3_dead)
            c = comm_of(doc, 4)
            if c["ranks"][3]["state"] != "dead":
                fail("rank 3 is not dead", doc)
            v = verdicts(doc, "dead")
            if not v or v[0]["ranks"] != [3] or doc["verdicts"][0]["kind"] != "dead":
                fail("no dead verdict first, naming rank 3", doc)
            if "ranks 0, 1, 2 failed in call 5" not in v[0]["text"]:
                fail("the dead verdict does not say where the others were", doc)
            print("ok:", v[0]["text"])
        finally:
            j.stop()
    elif case == "two":
        j = Job(job, "two", 4)
        try:
            time.sleep(2.0)
            doc, _ = ask_settled(j, tool)
            world = comm_of(doc, 4)
            halves = [c for c in doc["communicators"] if c["size"] == 2]
            if len(halves) != 2 or any(c["made"] != "split" for c in halves) or \
                    world["made"] != "init":
                fail("expected the job's communicator and two halves made by split", doc)
            # World rank 2 is rank 1 of the even half; world rank 0 waits.
            even = [c for c in halves if c["ranks"][0]["pid"] == world["ranks"][0]["pid"]][0]
            check_stalled(doc, even, 1, [0], 4)
            for v in doc["verdicts"]:
                if v["communicator"] != even["hash"] and v["kind"] != "ok":
                    fail("only the even half is held up", doc)
        finally:
            j.stop()
    elif case == "record":
        d = tempfile.mkdtemp(prefix="ras-record-")
        j = Job(job, "stall", 4, {"TUTTI_TIMEOUT": "2", "TUTTI_RECORD_DIR": d, "RAS_HOLD": "8"})
        try:
            for r in (0, 1, 3):
                line = j.line(r)
                if "TUTTI_TIMEOUT" not in line or "flight record: " + d not in line:
                    fail("rank %d's error names no flight record: %s" % (r, line))
            deadline = time.time() + 5
            while len(glob.glob(d + "/tutti-ras-*.json")) < 4 and time.time() < deadline:
                time.sleep(0.1)
            files = sorted(glob.glob(d + "/tutti-ras-*.json"))
            if len(files) != 4:
                fail("expected 4 flight records, found %s" % files)
            out = subprocess.run([tool, "--json", "--read"] + files, capture_output=True,
                                 text=True, timeout=10)
            doc = json.loads(out.stdout)
            v = verdicts(doc, "stalled")
            if not v or v[0]["ranks"] != [2] or doc["verdicts"][0]["kind"] != "stalled":
                fail("the merged records name no stalled rank 2 first", doc)
            c = comm_of(doc, 4)
            if c["ranks"][2]["calls"] != 4 or any(c["ranks"][r]["calls"] != 5 for r in (0, 1, 3)):
                fail("calls entered: rank 2 four, the others five", doc)
            text = subprocess.run([tool, "--read"] + files, capture_output=True, text=True,
                                  timeout=10).stdout
            if not text.startswith(v[0]["text"]):
                fail("the text's first line is not the verdict: " + text)
            print("ok:", v[0]["text"])
        finally:
            j.stop()
    elif case == "disabled":
        # NCCL_RAS_ENABLE=0: nothing answers, but the ranks whose call times
        # out still write their flight records and name them.
        d = tempfile.mkdtemp(prefix="ras-disabled-")
        j = Job(job, "stall", 4, {"NCCL_RAS_ENABLE": "0", "TUTTI_TIMEOUT": "2",
                                  "TUTTI_RECORD_DIR": d, "RAS_HOLD": "6"})
        try:
            time.sleep(1.0)
            out = subprocess.run([tool, "--json"], env=j.env, capture_output=True, text=True,
                                 timeout=10)
            if out.returncode != 1 or "nothing answers" not in out.stderr:
                fail("with NCCL_RAS_ENABLE=0 something answered: rc %d %s" %
                     (out.returncode, out.stdout[:200]))
            for r in (0, 1, 3):
                line = j.line(r)
                if "flight record: " + d not in line:
                    fail("rank %d's error names no flight record: %s" % (r, line))
            files = glob.glob(d + "/tutti-ras-*.json")
            if len(files) != 3:
                fail("expected the 3 waiting ranks' flight records, found %s" % files)
            print("ok: no listener; 3 flight records")
        finally:
            j.stop()
    elif case == "verdicts":
        verdicts_of_documents(tool)
    elif case == "netns":
        netns(job, tool, sys.argv[4])
    else:
        fail("unknown case " + case)
    print("PASS")


if __name__ == "__main__":
    main()
