"""Training on CPU for torch_cpu.py: the same small model, data and seed for
20 steps with DDP and with FSDP2 (fully_shard), once over a tutti group and
once over a Gloo group; the losses must be the same bits."""
import torch
import torch.distributed as dist

STEPS = 20


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 1))


def _batches(rank):
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(STEPS):
        x = torch.randn(16, 8, generator=g)
        yield x, x.sum(dim=1, keepdim=True).sin()


def _train(model, rank):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for x, y in _batches(rank):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach().clone())
    return torch.stack(losses)


def ddp(rank, group):
    from torch.nn.parallel import DistributedDataParallel
    return _train(DistributedDataParallel(_model(), process_group=group), rank)


def fsdp2(rank, group):
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard
    mesh = DeviceMesh.from_group(group, "cpu")
    model = _model()
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return _train(model, rank)


def check_training(rank, n, tutti_group, gloo_group):
    """Number of checks passed; raises AssertionError on a difference."""
    checks = 0
    for name, fn in (("DDP", ddp), ("FSDP2", fsdp2)):
        got = fn(rank, tutti_group)
        want = fn(rank, gloo_group)
        if not torch.equal(got, want):
            raise AssertionError(f"rank {rank}: {name}: losses differ:\ntutti {got.tolist()}\n"
                                 f"gloo  {want.tolist()}")
        if rank == 0:
            print(f"  {name}, {n} ranks, {STEPS} steps: same losses on tutti and Gloo "
                  f"(first {got[0].item():.6f}, last {got[-1].item():.6f})", flush=True)
        checks += 1
    return checks
