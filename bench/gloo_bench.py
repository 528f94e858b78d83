#!/usr/bin/env python3
"""The Gloo side of the CPU comparison (PyTorch's gloo backend): allreduce of
float tensors, same sizes and timing method as tutti-perf, written as
tutti-perf JSON. Usage: gloo_bench.py NRANKS [-b 8] [-e 128M] [-f 4] [-n 20]
[-w 5] [--json FILE]. Needs torch (Debian: python3-torch)."""
import argparse, datetime, json, os, socket, sys, time


def size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * mult[s[-1].upper()]) if s[-1].upper() in mult else int(s)


def worker(rank, n, args, port, q):
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n)
    rows = []
    b = args.b
    # As tutti-perf and nccl-tests: call i works on the piece at offset
    # b * (i % (e / b)) of one e-byte buffer, so every size walks all of it.
    flat = torch.zeros(max(1, args.e // 4), dtype=torch.float32)
    while b <= args.e:
        cnt = max(1, b // 4)
        steps = max(1, flat.numel() // cnt)
        views = [flat.narrow(0, k * cnt, cnt) for k in range(min(steps, max(args.n, args.w)))]
        for i in range(args.w):
            dist.all_reduce(views[i % steps])
        dist.barrier()
        t0 = time.perf_counter()
        for i in range(args.n):
            dist.all_reduce(views[i % steps])
        el = (time.perf_counter() - t0) / args.n
        out = torch.tensor([el], dtype=torch.float64)
        dist.all_reduce(out, op=dist.ReduceOp.MAX)
        rows.append((b, out.item()))
        if rank == 0:
            algbw = b / out.item() / 1e9
            print(f"{b:13d} {out.item()*1e6:12.2f} {algbw:10.3f} {algbw*2*(n-1)/n:10.3f}", flush=True)
        b *= args.f
    if rank == 0:
        q.put(rows)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("nranks", type=int)
    p.add_argument("-b", type=size, default=8)
    p.add_argument("-e", type=size, default=128 << 20)
    p.add_argument("-f", type=int, default=4)
    p.add_argument("-n", type=int, default=20)
    p.add_argument("-w", type=int, default=5)
    p.add_argument("--json")
    args = p.parse_args()
    import torch
    import torch.multiprocessing as mp
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    n = args.nranks
    print(f"# Gloo (PyTorch {torch.__version__}), allreduce, {n} ranks\n#{'size':>12} {'time(us)':>12} {'algbw':>10} {'busbw':>10}")
    procs = [ctx.Process(target=worker, args=(r, n, args, port, q)) for r in range(n)]
    for pr in procs:
        pr.start()
    rows = q.get()
    for pr in procs:
        pr.join()
    if args.json:
        host = socket.gethostname()
        date = datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ")
        name = f"Gloo (PyTorch {torch.__version__})"
        recs = []
        for b, t in rows:
            algbw = b / t / 1e9
            recs.append({"library": name, "collective": "allreduce", "nranks": n, "bytes": b,
                         "count": max(1, b // 4), "type": "float", "op": "sum", "root": 0,
                         "out_of_place": {"time_us": t * 1e6, "algbw_gbs": algbw,
                                          "busbw_gbs": algbw * 2 * (n - 1) / n, "wrong": None},
                         "in_place": None, "date": date, "hostname": host})
        with open(args.json, "w") as f:
            json.dump({"format": "tutti-perf/1", "library": {"name": name, "path": "gloo", "version": 0},
                       "collective": "allreduce", "nranks": n, "records": recs, "status": "ok"}, f, indent=1)


if __name__ == "__main__":
    main()
