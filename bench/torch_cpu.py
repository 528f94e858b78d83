"""all_reduce on CPU tensors through torch.distributed: the `tutti` backend
against Gloo, in the same run (each rank holds one group of each), 8 B to
64 MB of float32, and the cost of the Python/C boundary: an 8-byte all_reduce
through the backend against the same call made directly through ctypes.

    python bench/torch_cpu.py [--ranks 2,4] [--max-bytes 64M] [--iters 20]

Needs torch and the tutti package (pip install .). Prints one table per rank
count; exits non-zero when a result is wrong or a run fails."""
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


def rank_main(rank, n, port, sizes, iters, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
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
    if rank == 0:
        out.put(rows)
    dist.destroy_process_group()


def _size(b):
    for u, s in ((1 << 20, "M"), (1 << 10, "K")):
        if b >= u:
            return f"{b // u}{s}"
    return f"{b}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", default="2,4")
    p.add_argument("--min-bytes", default="8")
    p.add_argument("--max-bytes", default="64M")
    p.add_argument("--iters", type=int, default=20)
    a = p.parse_args()
    sizes, b = [], _bytes(a.min_bytes)
    while b < _bytes(a.max_bytes):
        sizes.append(b)
        b *= 8
    sizes.append(_bytes(a.max_bytes))
    print(f"# {time.strftime('%Y-%m-%d')}, torch {torch.__version__}, {os.cpu_count()} cores, "
          f"float32 all_reduce (sum); busbw = 2(n-1)/n * bytes / time")
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
        ps = [ctx.Process(target=rank_main, args=(r, n, port, sizes, a.iters, q))
              for r in range(n)]
        for proc in ps:
            proc.start()
        try:
            rows = q.get(timeout=600)
        except Exception:
            rows = None
        for proc in ps:
            proc.join(timeout=30)
        if rows is None or any(proc.exitcode != 0 for proc in ps):
            print(f"FAILED: {n} ranks: exit codes {[proc.exitcode for proc in ps]}")
            return 1
        f = 2 * (n - 1) / n
        print(f"\n{n} ranks\n{'bytes':>6} {'tutti us':>10} {'gloo us':>10} {'tutti GB/s':>11} "
              f"{'gloo GB/s':>10} {'speedup':>8}")
        for nbytes, tt, tg in rows:
            print(f"{_size(nbytes):>6} {tt * 1e6:10.1f} {tg * 1e6:10.1f} {f * nbytes / tt / 1e9:11.3f}"
                  f" {f * nbytes / tg / 1e9:10.3f} {tg / tt:7.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
