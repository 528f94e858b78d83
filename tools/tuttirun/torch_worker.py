"""The worker test_torchrun.sh starts under torchrun and under tuttirun.

env:       prints the variables the launcher added to the environment it was
           started from ($BASE_ENV lists those), tutti's own left out, plus
           how Python was started; one line per rank.
allreduce: a gloo all-reduce, all-gather and broadcast through
           init_process_group("env://"); prints the results.
failonce:  RANK 1 exits 3 on the first attempt; the restarted group meets
           through the store and prints its restart count.
compare TORCH_VERSION FLAGS A B: compares the env lines of two runs (A under
           torchrun, B under tuttirun) after the normalisation below; exits 1
           on a difference. FLAGS: "port" when the launcher picked the port.
"""
import os
import re
import sys

TUTTI_OWN = ("NCCL_COMM_ID", "TUTTI_JOB_SECRET", "TUTTI_LAUNCHER")


def say(line):
    # One write per line: under torchrun the ranks share one stdout, and
    # print() under python -u writes the text and the newline separately.
    os.write(1, (line + "\n").encode())


def env():
    with open(os.environ["BASE_ENV"], "rb") as f:
        base = {e.split(b"=", 1)[0].decode() for e in f.read().split(b"\0") if e}
    added = sorted(k for k in os.environ if k not in base and k not in TUTTI_OWN)
    unbuffered = type(sys.stdout.buffer).__name__ == "FileIO"  # python -u
    say("ENV " + " ".join(f"{k}={os.environ[k]}" for k in added) +
        f" argv={sys.argv[1:]} unbuffered={unbuffered}")


def allreduce():
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    t = torch.arange(6, dtype=torch.float64) * (rank + 1)
    dist.all_reduce(t)
    g = [torch.zeros(2) for _ in range(n)]
    dist.all_gather(g, torch.tensor([rank, rank * rank], dtype=torch.float32))
    b = torch.tensor([float(rank)]) if rank == n - 1 else torch.zeros(1)
    dist.broadcast(b, src=n - 1)
    dist.barrier()
    say(f"RESULT rank {rank} of {n}: sum {t.tolist()} gather {[x.tolist() for x in g]} "
        f"bcast {b.item()}")
    dist.destroy_process_group()


def failonce():
    import torch.distributed as dist

    count = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    rank = os.environ["RANK"]
    if count == 0 and rank == "1":
        say(f"RESULT rank {rank} fails on attempt {count}")
        sys.exit(3)
    if count > 0:  # the first attempt's other ranks may be stopped before they print
        say(f"RESULT start rank {rank} restart {count}")
    dist.init_process_group("gloo")
    dist.barrier()
    say(f"RESULT ok rank {rank} restart {count} world {dist.get_world_size()}")
    dist.destroy_process_group()


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
ERROR_FILE = re.compile(r"^(.*)/torchelastic_[a-z0-9_]{8}/(.+)_[a-z0-9_]{8}/(attempt_\d+/\d+/error\.json)$")


def normalise(path, torchrun, version, port_picked):
    """The values that must differ between two runs, made equal on purpose:
    - MASTER_PORT when the launcher picks it (a free port, new each run);
      every rank of the run must still see the same one;
    - a run id drawn by --standalone (a uuid4, new each run);
    - TORCHELASTIC_ERROR_FILE's two mkdtemp folders (random names); the
      temp root, the run id and attempt_<k>/<local_rank>/error.json stay.
    And where this torch is older than the 2.x tuttirun follows:
    - torch < 2.2 names NCCL_ASYNC_ERROR_HANDLING what 2.2+ calls
      TORCH_NCCL_ASYNC_ERROR_HANDLING;
    - torch < 2.4 does not share the c10d agent's store with the workers
      (TORCHELASTIC_USE_AGENT_STORE=False); 2.4+ does (True), and so does
      tuttirun, which serves that store;
    - older torchruns (1.13) do not tell workers TORCHELASTIC_SIGNALS_TO_HANDLE;
      2.11's does (SIGTERM,SIGINT,SIGHUP,SIGQUIT by default), and so does
      tuttirun: where torchrun sets none, its default stands in."""
    out, ports = [], set()
    for line in open(path):
        if not line.startswith("ENV "):
            continue
        head, tail = line.rstrip("\n").split(" argv=", 1)
        kv = dict(x.split("=", 1) for x in head.split()[1:])
        if port_picked and "MASTER_PORT" in kv:
            ports.add(kv["MASTER_PORT"])
            kv["MASTER_PORT"] = "<picked>"
        for k, v in list(kv.items()):
            v = UUID.sub("<uuid4>", v)
            m = ERROR_FILE.match(v) if k == "TORCHELASTIC_ERROR_FILE" else None
            kv[k] = f"{m.group(1)}/torchelastic_<tmp>/{m.group(2)}_<tmp>/{m.group(3)}" if m else v
        if torchrun and version < (2, 2) and "NCCL_ASYNC_ERROR_HANDLING" in kv:
            kv["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = kv.pop("NCCL_ASYNC_ERROR_HANDLING")
        if torchrun and version < (2, 4) and "c10d" in sys.argv[3]:
            kv["TORCHELASTIC_USE_AGENT_STORE"] = "True"
        if torchrun and "TORCHELASTIC_SIGNALS_TO_HANDLE" not in kv:
            kv["TORCHELASTIC_SIGNALS_TO_HANDLE"] = "SIGTERM,SIGINT,SIGHUP,SIGQUIT"
        out.append(" ".join(f"{k}={kv[k]}" for k in sorted(kv)) + " argv=" + tail)
    if len(ports) > 1:
        print(f"{path}: the ranks saw different MASTER_PORTs {sorted(ports)}")
        out.append("<ports differ>")
    return sorted(out)


def compare():
    version = tuple(int(x) for x in re.findall(r"\d+", sys.argv[2])[:2])
    port_picked = "port" in sys.argv[3]
    a = normalise(sys.argv[4], True, version, port_picked)
    b = normalise(sys.argv[5], False, version, port_picked)
    if a == b and a:
        print(f"  same environment for {len(a)} ranks")
        return 0
    print("  torchrun:" if a else "  torchrun: no ENV lines")
    for line in a:
        print("    " + line)
    print("  tuttirun:" if b else "  tuttirun: no ENV lines")
    for line in b:
        print("    " + line)
    for x, y in zip(a, b):
        dx = set(x.split()) ^ set(y.split())
        if dx:
            print("  differs in:", " ".join(sorted(dx)))
    return 1


if __name__ == "__main__":
    if sys.argv[1] == "compare":
        sys.exit(compare())
    {"env": env, "allreduce": allreduce, "failonce": failonce}[sys.argv[1]]()
