"""all_reduce on CPU tensors through torch.distributed: the `tutti` backend
against Gloo, in the same run (each rank holds one group of each), 8 B to
64 MB of float32; the cost of the Python/C boundary (an 8-byte all_reduce
through the backend against the same call made directly through ctypes);
and DDP training steps per second on each backend.

    python bench/torch_cpu.py [--ranks 2,4] [--sizes 8,...,64M] [--iters 20] [--ddp 30]

Ranks are spawned on this host; under a launcher (RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT set, `--launched`) each process is one rank, so
that ranks can run on other hosts (bench/run_netns_torch.sh: two network
namespaces). Needs torch and the tutti package (pip install .). Prints one
table per rank count; exits non-zero when a result is wrong or a run fails."""
import argparse
import os
import socket
import sys
import time

import tutti.torch  # noqa: F401  (before torch)
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _bytes(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1].upper()] if s[-1].upper() in units else int(s)


def _time(fn, iters, group):
    fn()  # warm up (plans, buffers)
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters


def _per_call(fn, iters=20000):
    fn()
    best = None
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        dt = (time.perf_counter() - t0) / iters
        best = dt if best is None else min(best, dt)
    return best


def boundary():
    """Seconds per 8-byte all_reduce on a 1-rank group (no peer to wait for,
    so only the software path counts): (direct ctypes, the backend's method,
    dist.all_reduce on tutti, dist.all_reduce on Gloo)."""
    from tutti.torch import _capi as C
    dist.init_process_group("tutti", store=dist.HashStore(), rank=0, world_size=1)
    gloo = dist.new_group(backend="gloo")
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    t = torch.ones(2)
    ptr, h, opts = t.data_ptr(), backend._h, dist.AllreduceOptions()
    r = (_per_call(lambda: C.all_reduce(ptr, ptr, 2, C.FLOAT32, 0, h, None)),
         _per_call(lambda: backend.allreduce([t], opts)),
         _per_call(lambda: dist.all_reduce(t)),
         _per_call(lambda: dist.all_reduce(t, group=gloo)))
    dist.destroy_process_group()
    return r


def ddp_steps(groups, steps):
    """Steps per second of DDP on each group: the same model (4 Linear layers
    of 1024, 16 MB of gradients), data and seed, so the losses must agree."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    rank = dist.get_rank()
    res = {}
    for name, g in groups.items():
        torch.manual_seed(0)
        model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(4)])
        ddp = DDP(model, process_group=g)
        opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
        gen = torch.Generator().manual_seed(rank)
        x, y = torch.randn(32, 1024, generator=gen), torch.randn(32, 1024, generator=gen)

        def step():
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            loss.backward()
            opt.step()
            return loss.item()
        for _ in range(3):
            step()  # warm up: buckets, plans
        dist.barrier(group=g)
        t0 = time.perf_counter()
        for _ in range(steps):
            loss = step()
        res[name] = (steps / (time.perf_counter() - t0), loss)
    if abs(res["tutti"][1] - res["gloo"][1]) > 1e-6 * max(1.0, abs(res["gloo"][1])):
        raise SystemExit(f"rank {rank}: DDP losses differ: tutti {res['tutti'][1]} "
                         f"gloo {res['gloo'][1]}")
    return res


def rank_main(rank, n, master, sizes, iters, ddp, out):
    os.environ.update(MASTER_ADDR=master[0], MASTER_PORT=str(master[1]))
    torch.set_num_threads(1)
    dist.init_process_group("tutti", rank=rank, world_size=n)
    groups = {"tutti": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    rows = []
    for nbytes in sizes:
        x = torch.ones(max(nbytes // 4, 1))
        row = [nbytes]
        for name, g in groups.items():
            k = iters * 10 if nbytes <= (64 << 10) else iters if nbytes <= (4 << 20) \
                else max(3, iters // 5)
            sec = _time(lambda g=g: dist.all_reduce(x.fill_(1), group=g), k, g)
            if not torch.all(x == n):
                raise SystemExit(f"rank {rank}: {name} all_reduce of {nbytes} B is wrong")
            row.append(sec)
        rows.append(row)
    steps = ddp_steps(groups, ddp) if ddp > 0 else None
    if rank == 0:
        out.put((rows, steps))
    dist.destroy_process_group()


def _size(b):
    for u, s in ((1 << 20, "M"), (1 << 10, "K")):
        if b >= u:
            return f"{b // u}{s}"
    return f"{b}"


def report(n, rows, steps):
    f = 2 * (n - 1) / n
    print(f"\n{n} ranks\n{'bytes':>6} {'tutti us':>10} {'gloo us':>10} {'tutti GB/s':>11} "
          f"{'gloo GB/s':>10} {'speedup':>8}")
    for nbytes, tt, tg in rows:
        print(f"{_size(nbytes):>6} {tt * 1e6:10.1f} {tg * 1e6:10.1f} {f * nbytes / tt / 1e9:11.3f}"
              f" {f * nbytes / tg / 1e9:10.3f} {tg / tt:7.2f}x")
    if steps:
        (st, lt), (sg, _) = steps["tutti"], steps["gloo"]
        print(f"DDP, 4 x Linear(1024, 1024), batch 32 per rank: {st:.1f} steps/s on tutti, "
              f"{sg:.1f} on Gloo ({st / sg:.2f}x), same loss {lt:.6f}")


class _Out:
    def __init__(self):
        self.v = None

    def put(self, v):
        self.v = v


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", default="2,4")
    p.add_argument("--sizes", default="8,64,512,4K,32K,256K,1M,2M,16M,64M")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--ddp", type=int, default=30, help="DDP steps timed per backend (0: none)")
    p.add_argument("--launched", action="store_true",
                   help="one rank of a job whose launcher set RANK, WORLD_SIZE, MASTER_ADDR/PORT")
    a = p.parse_args()
    sizes = [_bytes(x) for x in a.sizes.split(",")]
    if a.launched:
        rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        out = _Out()
        rank_main(rank, n, (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])), sizes,
                  a.iters, a.ddp, out)
        if rank == 0:
            print(f"# {time.strftime('%Y-%m-%d %H:%M')} UTC, torch {torch.__version__}, "
                  f"{os.cpu_count()} cores, {n} ranks launched, float32 all_reduce (sum); "
                  f"busbw = 2(n-1)/n * bytes / time")
            report(n, *out.v)
        return 0
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} UTC, torch {torch.__version__}, "
          f"{os.cpu_count()} cores, float32 all_reduce (sum); busbw = 2(n-1)/n * bytes / time")
    d, m, tt, tg = boundary()
    print(f"8-byte all_reduce, 1 rank: {d * 1e6:.1f} us by ctypes directly, {m * 1e6:.1f} us "
          f"through the backend's method (boundary {(m - d) * 1e6:.1f} us), {tt * 1e6:.1f} us "
          f"through dist.all_reduce (Gloo: {tg * 1e6:.1f} us)")
    ctx = mp.get_context("spawn")
    for n in map(int, a.ranks.split(",")):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        q = ctx.Queue()
        ps = [ctx.Process(target=rank_main,
                          args=(r, n, ("127.0.0.1", port), sizes, a.iters, a.ddp, q))
              for r in range(n)]
        for proc in ps:
            proc.start()
        try:
            got = q.get(timeout=900)
        except Exception:
            got = None
        for proc in ps:
            proc.join(timeout=30)
        if got is None or any(proc.exitcode != 0 for proc in ps):
            print(f"FAILED: {n} ranks: exit codes {[proc.exitcode for proc in ps]}")
            return 1
        report(n, *got)
    return 0


if __name__ == "__main__":
    sys.exit(main())
