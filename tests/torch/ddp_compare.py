"""DistributedDataParallel training of a torchvision model on synthetic data,
to compare two NCCL libraries: run it once under NVIDIA's NCCL and once with
LD_PRELOAD=libtutti.so.0, then compare the two result files.

  torchrun --nproc_per_node 2 ddp_compare.py OUT.pt [--steps 200] [--model resnet18]
  python3 ddp_compare.py --compare A.pt B.pt

Deterministic: fixed seeds, cuDNN in deterministic mode, the same data on
every run. Rank 0 saves the loss curve, the final parameters and the steps
per second (timed over all but the first 20 steps)."""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F


def train(args):
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    import torchvision

    model = getattr(torchvision.models, args.model)(num_classes=10).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(1234 + rank)
    # A learnable synthetic task: the label is a function of the image.
    xs = torch.randn(16, args.batch, 3, 32, 32, generator=g)
    ys = (xs.mean(dim=(2, 3, 4)) > 0).long() + 2 * (xs[:, :, 0].mean(dim=(2, 3)) > 0).long()
    losses = []
    torch.cuda.synchronize()
    t0 = None
    for step in range(args.steps):
        if step == 20:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        x = xs[step % 16].to(dev, non_blocking=True)
        y = ys[step % 16].to(dev, non_blocking=True)
        loss = F.cross_entropy(ddp(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    torch.cuda.synchronize()
    sps = (args.steps - 20) / (time.perf_counter() - t0)
    if rank == 0:
        out = {
            "losses": torch.stack(losses).cpu(),
            "params": {k: v.detach().cpu() for k, v in model.state_dict().items()},
            "steps_per_s": sps,
        }
        torch.save(out, args.out)
        print(f"ddp_compare: {args.model}, {args.steps} steps, {world} ranks, batch {args.batch} "
              f"per rank: loss {losses[0].item():.4f} -> {losses[-1].item():.4f}, "
              f"{sps:.1f} steps/s")
    dist.destroy_process_group()


def compare(a, b):
    ra, rb = torch.load(a), torch.load(b)
    worst = 0.0
    for k, v in ra["params"].items():
        w = rb["params"][k]
        if v.is_floating_point():
            worst = max(worst, (v - w).abs().max().item())
        elif not torch.equal(v, w):
            worst = float("inf")
    dl = (ra["losses"] - rb["losses"]).abs().max().item()
    print(f"final loss {ra['losses'][-1].item():.6f} vs {rb['losses'][-1].item():.6f}; "
          f"largest loss difference over all steps {dl:.3g}; largest parameter difference "
          f"{worst:.3g}; steps/s {ra['steps_per_s']:.1f} vs {rb['steps_per_s']:.1f} "
          f"({ra['steps_per_s'] / rb['steps_per_s']:.2f}x)")
    return 0 if worst <= 1e-4 else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--model", default="resnet18")
    train(p.parse_args())
