"""A rank that dies in the middle of training must surface as an error in
the survivor, not a hang: rank 1 exits after a few all-reduces; rank 0 goes
on calling all_reduce and must get an exception (or be stopped by PyTorch's
watchdog) well before the timeout given here. Run with
  TUTTI_TIMEOUT=10 LD_PRELOAD=libtutti.so.0 torchrun --nproc_per_node 2 kill_check.py
Prints "kill_check: rank 0 saw the failure after N s: ..." and exits 0 when it did."""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=120))
rank = dist.get_rank()
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
t = torch.ones(1 << 20, device="cuda")
for _ in range(5):
    dist.all_reduce(t)
torch.cuda.synchronize()
if rank == 1:
    os._exit(0)  # gone without a word: no destroy, no goodbye
start = time.time()
try:
    for _ in range(1000):
        dist.all_reduce(t)
        torch.cuda.synchronize()
        time.sleep(0.01)
    print("kill_check: rank 0 never noticed that rank 1 died")
    sys.exit(1)
except Exception as e:  # noqa: BLE001 - any error is the expected outcome
    msg = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
    print(f"kill_check: rank 0 saw the failure after {time.time() - start:.1f} s: {msg}")
    os._exit(0)
