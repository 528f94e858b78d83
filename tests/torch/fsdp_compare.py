"""A few training steps of a small transformer under FSDP2 (fully_shard per
layer, bf16 parameters, fp32 gradient reduction) or DDP, to compare two
NCCL libraries: run it under NVIDIA's NCCL and with LD_PRELOAD=libtutti.so.0,
then compare the result files. FSDP2 drives one communicator from several
streams (all-gathers and reduce-scatters on their own, compute on a third).

  torchrun --nproc_per_node 2 fsdp_compare.py OUT.pt [--mode fsdp|ddp] [--steps 12]
           [--hostid]    # each rank its own host (NCCL_HOSTID): two ranks on one GPU
  python3 fsdp_compare.py --compare A.pt B.pt

Ranks share the GPUs there are (rank % device count). Rank 0 saves the
losses and the full final parameters."""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class Model(nn.Module):
    def __init__(self, vocab=512, d=256, heads=4, layers=4, seq=64):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(seq, d))
        self.layers = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.head = nn.Linear(d, vocab)

    def forward(self, x):
        h = self.emb(x) + self.pos[: x.shape[1]]
        for layer in self.layers:
            h = layer(h)
        return self.head(h)


def train(args):
    rank = int(os.environ["RANK"])
    if args.hostid:
        os.environ["NCCL_HOSTID"] = f"fsdp-compare-host-{rank}"
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    world = dist.get_world_size()
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True, warn_only=True)
    model = Model().to(dev)
    if args.mode == "fsdp":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for layer in model.layers:
            fully_shard(layer, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
        net = model
    else:
        net = nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(99 + rank)
    # A learnable task: predict the next token of a shifted ramp.
    starts = torch.randint(0, 512, (args.steps, args.batch, 1), generator=g)
    seqs = (starts + torch.arange(65)) % 512
    losses = []
    for step in range(args.steps):
        x = seqs[step, :, :-1].to(dev)
        y = seqs[step, :, 1:].to(dev)
        loss = F.cross_entropy(net(x).float().flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        # The mean loss over ranks, as a trainer logs it.
        ll = loss.detach().clone()
        dist.all_reduce(ll)
        losses.append(ll / world)
    torch.cuda.synchronize()
    state = {}
    for k, v in model.state_dict().items():
        v = v.full_tensor() if hasattr(v, "full_tensor") else v
        state[k] = v.detach().float().cpu()
    if rank == 0:
        out = {"losses": torch.stack(losses).cpu(), "params": state, "mode": args.mode}
        torch.save(out, args.out)
        print(f"fsdp_compare {args.mode}: losses " + " ".join(f"{x:.4f}" for x in out["losses"]))
    dist.barrier()
    dist.destroy_process_group()


def compare(a_path, b_path):
    a, b = torch.load(a_path), torch.load(b_path)
    la, lb = a["losses"], b["losses"]
    ok = bool(torch.isfinite(la).all()) and bool(torch.isfinite(lb).all())
    ok = ok and la.shape == lb.shape and float(la[-1]) < float(la[0])
    dl = float((la - lb).abs().max()) if la.shape == lb.shape else float("inf")
    dp, same = 0.0, True
    for k, v in a["params"].items():
        w = b["params"][k]
        dp = max(dp, float((v - w).abs().max()))
        same = same and torch.equal(v, w)
    ok = ok and dl <= 1e-3 and dp <= 1e-3
    print(
        f"compare {a['mode']}: {os.path.basename(a_path)} vs {os.path.basename(b_path)}: "
        f"loss {float(la[0]):.4f} -> {float(la[-1]):.4f} (other {float(lb[-1]):.4f}), "
        f"max loss diff {dl:.2e}, max param diff {dp:.2e}, "
        f"{'bit-identical' if same and dl == 0 else 'not bit-identical'}: "
        f"{'PASS' if ok else 'FAIL'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("out", nargs="?")
    p.add_argument("--mode", choices=["fsdp", "ddp"], default="fsdp")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--hostid", action="store_true")
    p.add_argument("--compare", nargs=2)
    a = p.parse_args()
    sys.exit(compare(*a.compare) if a.compare else train(a))
