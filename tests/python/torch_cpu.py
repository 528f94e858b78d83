"""torch.distributed's `tutti` backend on CPU tensors against Gloo, in one job:
each rank (1 to 4 processes, spawned) runs every operation on a tutti group
and on a Gloo group with the same inputs and requires the same bits; then
DDP and FSDP2 (fully_shard) for 20 steps on each, requiring the same losses;
then a rank that dies and one that hangs, whose peer's next call must fail
with tutti's error within TUTTI_TIMEOUT rather than hang.

    python torch_cpu.py [--ranks 1,2,3,4] [--only ops|train|death]

Exit status 0 when everything held; the last line counts the checks."""
import argparse
import os
import socket
import sys
import time
import traceback

import tutti.torch  # noqa: F401  (registers the backend; before torch)
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

R = dist.ReduceOp
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.uint8, torch.int32, torch.int64]
DTYPES = FLOATS + INTS


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def data(rank, n, dtype, k=0):
    """Small integers (1..3), so sums and products stay exact in every dtype."""
    t = (torch.arange(n * 6, dtype=torch.int64) * (k + 1) + rank * 5 + k) % 3 + 1
    return t.to(dtype)


class Checker:
    def __init__(self, rank, n, tutti_g, gloo_g):
        self.rank, self.n, self.tg, self.gg = rank, n, tutti_g, gloo_g
        self.count = 0

    def same(self, what, fn, close=False):
        """fn(group) -> tensors; both groups' results must match bit for bit."""
        got = fn(self.tg)
        want = fn(self.gg)
        got = got if isinstance(got, (list, tuple)) else [got]
        want = want if isinstance(want, (list, tuple)) else [want]
        for a, b in zip(got, want, strict=True):
            ok = a.dtype == b.dtype and a.shape == b.shape and (
                torch.allclose(a.double(), b.double(), rtol=1e-2) if close else torch.equal(a, b))
            if not ok:
                raise AssertionError(f"rank {self.rank}/{self.n}: {what}: tutti {a} != gloo {b}")
        self.count += 1


def check_ops(c):
    rank, n = c.rank, c.n
    for dt in DTYPES:
        ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX] + ([R.AVG] if dt in FLOATS else [])
        for op in ops:
            def ar(g, op=op, dt=dt):
                t = data(rank, n, dt)
                w = dist.all_reduce(t, op=op, group=g, async_op=True)
                assert w.wait()
                # As Gloo's: its future holds the output. (is_completed() is
                # not checked: torch 2.15 answers it for a Python backend's
                # Work from its own holder, never asking the backend.)
                assert torch.equal(w.get_future().value()[0], t), (g, w.get_future().value())
                return t
            # AVG divides: exact where n is a power of two.
            c.same(f"all_reduce {op} {dt}", ar, close=(op == R.AVG and n == 3))

        def non_contig(g, dt=dt):
            t = data(rank, n, dt).reshape(-1, 2)
            v = t[:, 1]
            if g is c.gg:
                # Gloo in torch 2.15 writes a strided view's result as if it
                # were contiguous (over its neighbours): give it a copy.
                w = v.contiguous()
                dist.all_reduce(w, group=g)
                v.copy_(w)
            else:
                dist.all_reduce(v, group=g)
            return t
        c.same(f"all_reduce non-contiguous {dt}", non_contig)
        for root in range(n):
            def bc(g, root=root, dt=dt):
                t = data(rank, n, dt)
                dist.broadcast(t, src=root, group=g)
                return t
            c.same(f"broadcast root {root} {dt}", bc)

            def red(g, root=root, dt=dt):
                t = data(rank, n, dt)
                dist.reduce(t, dst=root, op=R.MAX, group=g)
                return t if rank == root else torch.zeros(1)
            c.same(f"reduce root {root} {dt}", red)

            def gat(g, root=root, dt=dt):
                out = [torch.zeros(6, dtype=dt) for _ in range(n)] if rank == root else None
                dist.gather(data(rank, n, dt)[:6], out, dst=root, group=g)
                return out or [torch.zeros(1)]
            c.same(f"gather root {root} {dt}", gat)

            def sca(g, root=root, dt=dt):
                src = [data(k, n, dt)[:5] for k in range(n)] if rank == root else None
                out = torch.zeros(5, dtype=dt)
                dist.scatter(out, src, src=root, group=g)
                return out
            c.same(f"scatter root {root} {dt}", sca)

        def ag(g, dt=dt):
            out = [torch.zeros(n * 6, dtype=dt) for _ in range(n)]
            dist.all_gather(out, data(rank, n, dt), group=g)
            return out
        c.same(f"all_gather {dt}", ag)

        def agt(g, dt=dt):
            out = torch.zeros(n * n * 6, dtype=dt)
            dist.all_gather_into_tensor(out, data(rank, n, dt), group=g)
            return out
        c.same(f"all_gather_into_tensor {dt}", agt)

        def rs(g, dt=dt):
            out = torch.zeros(6, dtype=dt)
            dist.reduce_scatter(out, list(data(rank, n, dt).chunk(n)), group=g)
            return out
        c.same(f"reduce_scatter {dt}", rs)

        def rst(g, dt=dt):
            out = torch.zeros(6, dtype=dt)
            dist.reduce_scatter_tensor(out, data(rank, n, dt), op=R.SUM, group=g)
            return out
        c.same(f"reduce_scatter_tensor {dt}", rst)

        def a2a(g, dt=dt):
            out = [torch.zeros(6, dtype=dt) for _ in range(n)]
            dist.all_to_all(out, list(data(rank, n, dt).chunk(n)), group=g)
            return out
        c.same(f"all_to_all {dt}", a2a)

        def a2as(g, dt=dt):
            out = torch.zeros(n * 6, dtype=dt)
            dist.all_to_all_single(out, data(rank, n, dt), group=g)
            return out
        c.same(f"all_to_all_single {dt}", a2as)

        def a2av(g, dt=dt):
            # rank r sends (p + r) % 3 + 1 rows of 2 to peer p
            ins = [(p + rank) % 3 + 1 for p in range(n)]
            outs = [(rank + p) % 3 + 1 for p in range(n)]
            inp = (torch.arange(sum(ins) * 2) + 100 * rank).to(dt).reshape(-1, 2)
            out = torch.zeros(sum(outs), 2, dtype=dt)
            dist.all_to_all_single(out, inp, outs, ins, group=g)
            return out
        c.same(f"all_to_all_single with splits {dt}", a2av)

    for dt in (torch.complex64, torch.complex128):
        def cplx(g, dt=dt):
            t = torch.complex(data(rank, n, torch.float64), data(rank, n, torch.float64, 1))
            t = t.to(dt)
            dist.all_reduce(t, group=g)
            return t
        c.same(f"all_reduce {dt}", cplx)

        def cbc(g, dt=dt):
            t = torch.complex(data(rank, n, torch.float64), -data(rank, n, torch.float64)).to(dt)
            dist.broadcast(t, src=n - 1, group=g)
            return t
        c.same(f"broadcast {dt}", cbc)

    if n > 1:
        def p2p(g):
            # Two messages each way with distinct tags, in posted order.
            nxt, prv = (rank + 1) % n, (rank - 1) % n
            a, b = torch.zeros(4), torch.zeros(3, dtype=torch.int64)
            ops = [dist.P2POp(dist.irecv, a, prv, g, tag=7),
                   dist.P2POp(dist.isend, data(rank, n, torch.float32)[:4], nxt, g, tag=7),
                   dist.P2POp(dist.isend, torch.arange(3) + rank, nxt, g, tag=9),
                   dist.P2POp(dist.irecv, b, prv, g, tag=9)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            return [a, b]
        c.same("batch_isend_irecv ring with tags", p2p)

        def sr(g):
            t = torch.zeros(5)
            if rank == 0:
                for p in range(1, n):
                    dist.send(torch.full((5,), float(p)), dst=p, group=g, tag=3)
                t.fill_(1)
            else:
                dist.recv(t, src=0, group=g, tag=3)
            return t
        c.same("send/recv", sr)

    def objs(g):
        out = [None] * n
        dist.all_gather_object(out, {"rank": rank, "sq": rank * rank}, group=g)
        lst = [f"from {rank}", rank] if rank == 0 else [None, None]
        dist.broadcast_object_list(lst, src=0, group=g)
        return [torch.tensor([o["sq"] for o in out]), torch.tensor([lst[1]])]
    c.same("all_gather_object, broadcast_object_list", objs)
    dist.barrier(group=c.tg)
    c.count += 1


def check_errors(c):
    """Operations tutti's CPU backend lacks say so, naming the op."""
    t = torch.ones(4, dtype=torch.int32)
    try:
        dist.all_reduce(t, op=R.BAND, group=c.tg)
    except RuntimeError as e:
        assert "BAND" in str(e) and "all_reduce" in str(e), e
    else:
        raise AssertionError("all_reduce BAND did not fail")
    c.count += 1
    if c.n > 1 and c.rank < 2:
        # A tag out of the posted order is an error on the receiver.
        t = torch.zeros(2)
        if c.rank == 0:
            dist.send(torch.ones(2), dst=1, group=c.tg, tag=1)
        else:
            try:
                dist.recv(t, src=0, group=c.tg, tag=2)
            except RuntimeError as e:
                assert "tag 2" in str(e) and "tag 1" in str(e), e
            else:
                raise AssertionError("recv with another tag did not fail")
        c.count += 1


def worker(rank, n, port, what, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    try:
        # The default group on tutti ("tutti" = CPU only, or split by device
        # as "cpu:tutti,cuda:nccl" would be, which needs a GPU), Gloo beside it.
        dist.init_process_group("tutti" if what == "ops" else "cpu:tutti,cuda:gloo",
                                rank=rank, world_size=n)
        cpu = dist.group.WORLD._get_backend(torch.device("cpu"))
        assert type(cpu).__name__ == "TuttiBackend", type(cpu)
        gloo = dist.new_group(backend="gloo")
        c = Checker(rank, n, None, gloo)
        c.tg = dist.new_group(backend="tutti")  # and a second tutti group
        if what == "ops":
            check_ops(c)
            c.tg = dist.group.WORLD
            check_ops(c)
            check_errors(c)
        else:
            from train import check_training
            c.count += check_training(rank, n, dist.group.WORLD, gloo)
        dist.destroy_process_group()
        out.put((rank, c.count, None))
    except BaseException:
        out.put((rank, 0, traceback.format_exc()))


def dying(rank, n, port, how, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("tutti", rank=rank, world_size=n)
    t = torch.ones(1024)
    dist.all_reduce(t)
    if rank == 1:
        if how == "hang":
            time.sleep(120)  # alive, silent: only TUTTI_TIMEOUT can tell
        os._exit(3)  # dies without a word
    time.sleep(0.5)
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        out.put(("no error", time.monotonic() - start))
    except RuntimeError as e:
        out.put((str(e), time.monotonic() - start))
    out.close()
    out.join_thread()  # the message leaves before the process does
    os._exit(0)


def launch(target, n, args):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    ps = [ctx.Process(target=target, args=(r, n, port) + args + (q,)) for r in range(n)]
    for p in ps:
        p.start()
    return ps, q


def run_group(what, n, limit):
    ps, q = launch(worker, n, (what,))
    results, deadline = [], time.monotonic() + limit
    while len(results) < n and time.monotonic() < deadline:
        try:
            results.append(q.get(timeout=1))
        except Exception:
            if all(not p.is_alive() for p in ps) and q.empty():
                break
    for p in ps:
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
    errs = [f"rank {r}:\n{e}" for r, _, e in results if e]
    if len(results) < n:
        errs.append(f"{n - len(results)} rank(s) gave no result within {limit} s")
    return sum(k for _, k, _ in results), errs


def run_death(timeout_s, how):
    ps, q = launch(dying, 2, (how,))
    try:
        msg, took = q.get(timeout=timeout_s + 60)
    except Exception:
        msg, took = "no answer (hung?)", None
    ps[0].join(timeout=10)
    for p in ps:
        if p.is_alive():
            p.kill()
        p.join()
    print(f"  survivor after its peer {'hung' if how == 'hang' else 'died'}: "
          f"{took and round(took, 1)} s: {msg[:300]}", flush=True)
    if took is None or "tutti" not in msg or took > timeout_s + 5:
        return [f"the survivor of a peer that {how}s did not fail with tutti's error within "
                f"TUTTI_TIMEOUT ({timeout_s} s): {msg}"]
    return []


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", default="1,2,3,4")
    p.add_argument("--only", choices=["ops", "train", "death"])
    a = p.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    os.environ.setdefault("TUTTI_TIMEOUT", "10")
    errs, checks = [], 0
    start = time.monotonic()
    if a.only in (None, "ops"):
        for n in map(int, a.ranks.split(",")):
            t0 = time.monotonic()
            k, e = run_group("ops", n, 240)
            print(f"ops, {n} rank(s): {k} checks, {len(e)} failures, "
                  f"{time.monotonic() - t0:.1f} s", flush=True)
            checks += k
            errs += e
    if a.only in (None, "train"):
        t0 = time.monotonic()
        k, e = run_group("train", 2, 240)
        print(f"DDP and FSDP2, 2 ranks: {k} checks, {len(e)} failures, "
              f"{time.monotonic() - t0:.1f} s", flush=True)
        checks += k
        errs += e
    if a.only in (None, "death"):
        for how in ("exit", "hang"):
            e = run_death(float(os.environ["TUTTI_TIMEOUT"]), how)
            checks += 1
            errs += e
    for e in errs:
        print("FAILED:", e)
    print(f"torch_cpu: {checks - len(errs)} passed, {len(errs)} failed "
          f"({time.monotonic() - start:.0f} s)")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
