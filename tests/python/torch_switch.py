"""`import tutti.torch` alone makes PyTorch's NCCL backend run on tutti: with
two (or more) ranks, a few collectives, a DDP step and an FSDP2 step (FSDP1
where torch has no fully_shard), each checked exactly against a reference
computed on the CPU in float64, then which library served NCCL.

  torchrun --nproc_per_node 2 tests/python/torch_switch.py
  tuttirun -n 2 python3 tests/python/torch_switch.py
  ... torch_switch.py --hostid     # ranks share a GPU: each its own host (NCCL_HOSTID)

Ranks use the GPUs there are (LOCAL_RANK % device count); two ranks on one
GPU need NCCL_HOSTID set per rank, by the caller or with --hostid. The
values are small multiples of powers of two, so every sum is exact in
float32 whatever the order: results must equal the reference bit for bit
(to 1e-6 when the world size is not a power of two, where averages round).

Which library served NCCL: unless NCCL_DEBUG is set already, each rank runs
with NCCL_DEBUG=VERSION and NCCL_DEBUG_FILE in a temporary directory, and
the banner there names the library (tutti prints "NCCL version 2.32.6 (tutti
X)" on its first call; NVIDIA's NCCL prints "NCCL version 2.x.y+cudaZ");
besides, /proc/self/maps lists the NCCL libraries mapped and the process's
global scope must resolve ncclCommInitRank to tutti. Exit 0 when every check
passed on every rank and tutti served NCCL, 1 otherwise.

--backend gloo --device cpu runs the same steps without NCCL, to check the
script itself on a machine without GPUs (there is then no library verdict).
"""
import argparse
import os
import re
import sys
import tempfile

import tutti.torch  # noqa: F401 -- first: the point of the test (before torch)

import torch
import torch.distributed as dist
import torch.nn as nn

from tutti._process import global_provider, is_tutti, mapped_libraries

LR = 1.0 / 16


def say(msg):
    print(f"[rank {os.environ.get('RANK', '?')}] {msg}", flush=True)


def make_model(dtype, device):
    """Two linear layers with weights k/8, k in -3..3: every later value stays
    a short dyadic fraction."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 4)).to(dtype=dtype, device=device)
    with torch.no_grad():
        for li, layer in enumerate(m):
            w, b = layer.weight, layer.bias
            i = torch.arange(w.shape[0], dtype=dtype, device=device).unsqueeze(1)
            j = torch.arange(w.shape[1], dtype=dtype, device=device).unsqueeze(0)
            w.copy_(torch.remainder(3 * i + j + li, 7) - 3).div_(8)
            b.copy_(torch.remainder(torch.arange(b.shape[0], dtype=dtype, device=device), 3) - 1)
            b.div_(2)
    return m


def batch(rank, step, dtype, device):
    """Rank's input x (4 x 8, integers -2..2) and loss weights c (4 x 4, -1..1)."""
    b = torch.arange(4, dtype=dtype, device=device).unsqueeze(1)
    x = torch.remainder(b + 2 * torch.arange(8, dtype=dtype, device=device) + 3 * rank + 5 * step,
                        5) - 2
    c = torch.remainder(b + torch.arange(4, dtype=dtype, device=device) + step + rank, 3) - 1
    return x, c


def reference(world, steps):
    """Per step, every rank's output, and the parameters after the steps: SGD
    on the average over ranks of each rank's loss (y * c).sum()."""
    m = make_model(torch.float64, "cpu")
    outs = []
    for s in range(steps):
        grads = [torch.zeros_like(p) for p in m.parameters()]
        step_out = []
        for r in range(world):
            x, c = batch(r, s, torch.float64, "cpu")
            m.zero_grad()
            y = m(x)
            (y * c).sum().backward()
            step_out.append(y.detach().clone())
            for g, p in zip(grads, m.parameters()):
                g += p.grad
        outs.append(step_out)
        with torch.no_grad():
            for g, p in zip(grads, m.parameters()):
                p -= LR * (g / world)
    return outs, {k: v.detach().clone() for k, v in m.state_dict().items()}


def same(a, b, exact):
    a = a.detach().to("cpu", torch.float64)
    b = b.detach().to("cpu", torch.float64)
    if a.shape != b.shape:
        return False
    return torch.equal(a, b) if exact else bool(torch.allclose(a, b, rtol=0, atol=1e-6))


def check_collectives(rank, world, dev):
    ok = True
    t = torch.arange(6, dtype=torch.float32, device=dev) * (rank + 1)
    dist.all_reduce(t)
    ok &= same(t, torch.arange(6, dtype=torch.float64) * (world * (world + 1) // 2), True)
    t = torch.full((3,), float(rank), device=dev)
    dist.broadcast(t, src=world - 1)
    ok &= same(t, torch.full((3,), float(world - 1), dtype=torch.float64), True)
    mine = torch.arange(4, dtype=torch.float32, device=dev) + 10 * rank
    parts = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(parts, mine)
    ok &= all(same(p, torch.arange(4, dtype=torch.float64) + 10 * r, True)
              for r, p in enumerate(parts))
    say(f"collectives (all_reduce, broadcast, all_gather): {'ok' if ok else 'WRONG'}")
    return ok


def train(net, rank, world, dev, steps, exact, ref_out):
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    ok = True
    for s in range(steps):
        x, c = batch(rank, s, torch.float32, dev)
        y = net(x)
        ok &= same(y, ref_out[s][rank], exact)
        opt.zero_grad()
        (y * c).sum().backward()
        opt.step()
    return ok


def full_state(sd):
    out = {}
    for k, v in sd.items():
        v = v.full_tensor() if hasattr(v, "full_tensor") else v
        out[k.replace("module.", "", 1) if k.startswith("module.") else k] = v
    return out


def check_params(state, ref_state, exact):
    if set(state) != set(ref_state):
        return False
    return all(same(state[k], ref_state[k], exact) for k in ref_state)


def check_ddp(rank, world, dev, steps, exact, ref):
    model = make_model(torch.float32, dev)
    ids = [dev.index] if dev.type == "cuda" else None
    net = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    ok = train(net, rank, world, dev, steps, exact, ref[0])
    ok &= check_params(full_state(net.state_dict()), ref[1], exact)
    say(f"DDP, {steps} steps: {'ok' if ok else 'WRONG'}")
    return ok


def fsdp_wrapper():
    """(name, wrap) for FSDP2's fully_shard, else FSDP1, else (None, why)."""
    for mod in ("torch.distributed.fsdp", "torch.distributed._composable.fsdp"):
        try:
            fully_shard = __import__(mod, fromlist=["fully_shard"]).fully_shard

            def wrap(model, dev, shard=fully_shard):
                for layer in model:
                    shard(layer)
                shard(model)
                return model

            return "FSDP2 (fully_shard)", wrap
        except Exception as e:  # old torch: no fully_shard, or no FSDP that imports at all
            why = f"{type(e).__name__}: {e}"
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    except Exception as e:
        return None, f"{why}; FSDP1: {type(e).__name__}: {e}"

    def wrap1(model, dev):
        return FSDP(model, device_id=dev if dev.type == "cuda" else None)

    return "FSDP1 (FullyShardedDataParallel)", wrap1


def check_fsdp(rank, world, dev, steps, exact, ref):
    """True, False, or None when this torch has no FSDP that imports."""
    kind, wrap = fsdp_wrapper()
    if kind is None:
        say(f"FSDP: SKIPPED, none imports in torch {torch.__version__} ({wrap})")
        return None
    net = wrap(make_model(torch.float32, dev), dev)
    ok = train(net, rank, world, dev, steps, exact, ref[0])
    ok &= check_params(full_state(net.state_dict()), ref[1], exact)
    say(f"{kind}, {steps} steps: {'ok' if ok else 'WRONG'}")
    return ok


def served_by(log_path):
    """(is tutti, sentence) for the library that served this rank's NCCL calls."""
    libs = mapped_libraries()
    for p in libs:
        t = is_tutti(p)
        say(f"mapped: {p} ({'tutti' if t else 'not tutti' if t is False else '?'})")
    prov = global_provider()
    prov_ok = bool(prov and prov[1])
    say(f"global scope's ncclCommInitRank: {prov[0] if prov else 'none'} "
        f"({'tutti' if prov_ok else 'not tutti'})")
    banner = None
    if log_path is not None:
        try:
            with open(log_path, encoding="utf-8", errors="replace") as f:
                m = re.search(r"NCCL version \S+(?: \(tutti [^)]*\))?", f.read())
                banner = m.group(0) if m else ""
        except OSError:
            banner = ""
        say(f"NCCL_DEBUG=VERSION banner: {banner or 'none'}")
    ok = prov_ok and (banner is None or "(tutti " in banner)
    return ok, (prov[0] if prov else None)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hostid", action="store_true",
                   help="set NCCL_HOSTID per rank (ranks sharing one GPU)")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--backend", default="nccl")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = p.parse_args()

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    if args.hostid:
        os.environ["NCCL_HOSTID"] = f"torch-switch-host-{rank}"
    log_dir = log_path = None
    if args.backend == "nccl" and "NCCL_DEBUG" not in os.environ:
        log_dir = tempfile.TemporaryDirectory(prefix="torch-switch-")
        log_path = os.path.join(log_dir.name, "nccl.log")
        os.environ["NCCL_DEBUG"] = "VERSION"
        os.environ["NCCL_DEBUG_FILE"] = log_path
    if args.device == "cuda":
        dev = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(dev)
        torch.backends.cuda.matmul.allow_tf32 = False
    else:
        dev = torch.device("cpu")
    say(f"torch {torch.__version__}, {args.backend} on {dev}, world {world}, "
        f"NCCL_HOSTID={os.environ.get('NCCL_HOSTID', '')}")
    dist.init_process_group(args.backend, rank=rank, world_size=world)

    exact = world & (world - 1) == 0
    ref = reference(world, args.steps)
    ok = check_collectives(rank, world, dev)
    ok &= check_ddp(rank, world, dev, args.steps, exact, ref)
    fsdp = check_fsdp(rank, world, dev, args.steps, exact, ref)
    ok &= fsdp is not False
    if dev.type == "cuda":
        torch.cuda.synchronize()

    lib_ok, lib = True, None
    if args.backend == "nccl":
        lib_ok, lib = served_by(log_path)
    flag = torch.tensor([1 if ok and lib_ok else 0], device=dev)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    all_ok = bool(flag.item())
    dist.barrier()
    dist.destroy_process_group()
    if log_dir is not None:
        log_dir.cleanup()
    if args.backend == "nccl":
        verdict = f"NCCL served by {'tutti' if lib_ok else 'NOT tutti'}: {lib}"
    else:
        verdict = f"{args.backend}: no NCCL library in use"
    say(f"checks {'ok' if ok else 'FAILED'}; {verdict}")
    if rank == 0:
        note = "" if fsdp is not None else ", FSDP skipped"
        print(f"torch_switch: {'PASSED' if all_ok else 'FAILED'} ({world} ranks{note})", flush=True)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
