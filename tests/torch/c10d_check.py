"""Every c10d collective PyTorch offers, on GPU tensors, under whatever NCCL
library the process loaded (tutti through LD_PRELOAD, or NVIDIA's NCCL):
run with `torchrun --nproc_per_node N c10d_check.py OUT.pt`. Rank 0 saves
every result to OUT.pt, so two runs (tutti and NCCL) can be compared with
`python3 c10d_check.py --compare A.pt B.pt`. Inputs are small integers, so
sums, products, max and min are exact in fp32, bf16 and fp16 alike."""
import os
import sys

import torch
import torch.distributed as dist


def inputs(rank, n, dtype, dev, seed=0):
    g = torch.Generator().manual_seed(1000 * seed + rank)
    return torch.randint(-3, 4, (n,), generator=g).to(dtype).to(dev)


def run(out_path):
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
    torch.cuda.set_device(dev)
    res = {}
    ops = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "max": dist.ReduceOp.MAX,
           "min": dist.ReduceOp.MIN, "avg": dist.ReduceOp.AVG}
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        dn = str(dtype).split(".")[-1]
        for n in (1, 1000, 1 << 20):
            for name, op in ops.items():
                t = inputs(rank, n, dtype, dev, 1)
                dist.all_reduce(t, op=op)
                res[f"all_reduce/{dn}/{n}/{name}"] = t.cpu()
            t = inputs(rank, n, dtype, dev, 2)
            dist.broadcast(t, src=world - 1)
            res[f"broadcast/{dn}/{n}"] = t.cpu()
            t = inputs(rank, n, dtype, dev, 3)
            dist.reduce(t, dst=0, op=dist.ReduceOp.SUM)
            if rank == 0:
                res[f"reduce/{dn}/{n}"] = t.cpu()
            t = inputs(rank, n, dtype, dev, 4)
            lst = [torch.empty_like(t) for _ in range(world)]
            dist.all_gather(lst, t)
            res[f"all_gather/{dn}/{n}"] = torch.stack(lst).cpu()
            big = torch.empty(n * world, dtype=dtype, device=dev)
            dist.all_gather_into_tensor(big, t)
            res[f"all_gather_into_tensor/{dn}/{n}"] = big.cpu()
            src = inputs(rank, n * world, dtype, dev, 5)
            o = torch.empty(n, dtype=dtype, device=dev)
            dist.reduce_scatter_tensor(o, src)
            res[f"reduce_scatter_tensor/{dn}/{n}"] = o.cpu()
            o = torch.empty(n * world, dtype=dtype, device=dev)
            dist.all_to_all_single(o, src)
            res[f"all_to_all_single/{dn}/{n}"] = o.cpu()
            # send / recv around the ring, and the same as batch_isend_irecv
            nxt, prv = (rank + 1) % world, (rank - 1) % world
            s = inputs(rank, n, dtype, dev, 6)
            r = torch.empty_like(s)
            if rank % 2 == 0:
                dist.send(s, nxt)
                dist.recv(r, prv)
            else:
                dist.recv(r, prv)
                dist.send(s, nxt)
            res[f"send_recv/{dn}/{n}"] = r.cpu()
            r2 = torch.empty_like(s)
            reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, s, nxt), dist.P2POp(dist.irecv, r2, prv)])
            for q in reqs:
                q.wait()
            res[f"batch_isend_irecv/{dn}/{n}"] = r2.cpu()
    dist.barrier()
    # a subgroup (ncclCommSplit or a new communicator)
    sub = dist.new_group(ranks=list(range(0, world, 2)))
    if rank % 2 == 0:
        t = inputs(rank, 4096, torch.float32, dev, 7)
        dist.all_reduce(t, group=sub)
        res["new_group/all_reduce"] = t.cpu()
    dist.barrier()
    torch.cuda.synchronize()
    if rank == 0:
        torch.save(res, out_path)
        print(f"c10d_check: {len(res)} results saved to {out_path}")
    dist.destroy_process_group()


def compare(a, b):
    ra, rb = torch.load(a), torch.load(b)
    bad = [k for k in ra if k not in rb or not torch.equal(ra[k], rb[k])]
    missing = [k for k in rb if k not in ra]
    for k in bad[:20]:
        print("differs:", k)
    print(f"compare: {len(ra) - len(bad)} of {len(ra)} results identical, "
          f"{len(bad)} differ, {len(missing)} missing")
    return 0 if not bad and not missing else 1


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    run(sys.argv[1])
