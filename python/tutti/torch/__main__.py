"""python -m tutti.torch check: which NCCL library PyTorch uses in a process
that imported tutti.torch first (this one, and a child started to prove it).

Exit status: 0 when PyTorch's NCCL calls go to tutti, or when this PyTorch
has no NCCL at all (CPU-only builds; nothing to serve, said so); 1 when they
go to another library (or NCCL linked into torch), or when the `tutti`
backend for CPU tensors fails its 2-rank all_reduce; 2 on a usage error."""
import argparse
import os
import re
import subprocess
import sys

import tutti
import tutti.torch as tt
from tutti._process import global_provider, is_tutti, mapped_libraries

# Run with NCCL_DEBUG=VERSION: tutti prints "NCCL version 2.32.6 (tutti X)"
# when its logging starts (any first call, ncclGetVersion included); NVIDIA's
# NCCL prints "NCCL version 2.x.y+cudaZ" when a communicator is created. So
# the banner names the library that served the calls made through torch.
_CHILD = r"""
import ctypes, sys
import tutti.torch
import torch
if hasattr(torch._C, "_nccl_version"):
    print("child: torch.cuda.nccl.version() =", torch.cuda.nccl.version(), flush=True)
    if torch.cuda.is_available():
        import torch.distributed as dist
        dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
        # Out of place into a poisoned buffer: a call that does nothing
        # leaves the poison (an in-place 1-rank sum would look right).
        src = torch.arange(1, 5, device="cuda", dtype=torch.float32)
        out = torch.full((4,), -7.0, device="cuda")
        dist.all_gather_into_tensor(out, src)
        torch.cuda.synchronize()
        ok = out.tolist() == [1.0, 2.0, 3.0, 4.0]
        dist.destroy_process_group()
        print("child: 1-rank all-gather through torch.distributed:", "ok" if ok else "WRONG",
              flush=True)
        sys.exit(0 if ok else 1)
    # No GPU: a call that needs none, through torch's own NCCL binding
    # (ncclGetUniqueId), so the banner shows which library answered.
    if hasattr(torch.cuda.nccl, "unique_id"):
        uid = torch.cuda.nccl.unique_id()
        print("child: ncclGetUniqueId through torch.cuda.nccl.unique_id():", len(uid), "bytes",
              flush=True)
else:
    # No NCCL in torch: a 1-rank communicator through the global scope,
    # where `import tutti.torch` put tutti's symbols.
    class UniqueId(ctypes.Structure):
        _fields_ = [("internal", ctypes.c_char * 128)]
    scope = ctypes.CDLL(None)
    scope.ncclCommInitRank.argtypes = [ctypes.c_void_p, ctypes.c_int, UniqueId, ctypes.c_int]
    uid = UniqueId()
    comm = ctypes.c_void_p()
    rc = scope.ncclGetUniqueId(ctypes.byref(uid))
    if rc == 0:
        rc = scope.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0)
    if rc == 0:
        rc = scope.ncclCommDestroy(comm)
    print("child: 1-rank communicator through ctypes:", "ok" if rc == 0 else f"error {rc}",
          flush=True)
    sys.exit(0 if rc == 0 else 1)
"""

# The `tutti` backend for CPU tensors: a 2-rank all_reduce through
# torch.distributed, ranks as spawned processes over a TCP store.
_CPU_CHILD = r"""
import os, sys
import tutti.torch
import torch, torch.distributed as dist
import torch.multiprocessing as mp

def rank_main(rank, port):
    dist.init_process_group("tutti", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    t = torch.arange(4, dtype=torch.float32) + rank
    dist.all_reduce(t)
    ok = t.tolist() == [1.0, 3.0, 5.0, 7.0]
    dist.destroy_process_group()
    if not ok:
        raise SystemExit(f"rank {rank}: {t.tolist()}")

if __name__ == "__main__":
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(rank_main, args=(port,), nprocs=2)
    print("child: 2-rank all_reduce on the tutti CPU backend: ok", flush=True)
"""

_BANNER = re.compile(r"NCCL version (\S+)(?: \(tutti ([^)]*)\))?")


def _run_child(timeout):
    """(banner, tutti version or None, output, status) of a child with NCCL_DEBUG=VERSION."""
    env = dict(os.environ)
    env["NCCL_DEBUG"] = "VERSION"
    for k in ("NCCL_DEBUG_FILE", "NCCL_DEBUG_SUBSYS"):
        env.pop(k, None)
    top = os.path.dirname(os.path.dirname(os.path.abspath(tutti.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(x for x in (top, env.get("PYTHONPATH")) if x)
    try:
        p = subprocess.run([sys.executable, "-c", _CHILD], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace")
        return None, None, out + f"\n(child killed after {timeout:.0f} s)", None
    out = p.stdout.decode(errors="replace")
    m = _BANNER.search(out)
    if m is None:
        return None, None, out, p.returncode
    return m.group(0), m.group(2), out, p.returncode


def _check_cpu_backend(timeout):
    """(ok, message) of a 2-rank CPU all_reduce through the `tutti` backend."""
    import tempfile
    env = dict(os.environ)
    top = os.path.dirname(os.path.dirname(os.path.abspath(tutti.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(x for x in (top, env.get("PYTHONPATH")) if x)
    with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
        f.write(_CPU_CHILD)
        f.flush()
        try:
            p = subprocess.run([sys.executable, "-W", "ignore", f.name], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False, f"no answer within {timeout:.0f} s"
    out = p.stdout.decode(errors="replace").strip().splitlines()
    return p.returncode == 0, "\n".join("  | " + line for line in out[-8:])


def _describe(p):
    t = is_tutti(p)
    return f"{p} ({'tutti' if t else 'not tutti' if t is False else 'not loaded as a library'})"


def _cpu_backend_state(torch):
    """None when the `tutti` CPU backend is registered, else why it is not."""
    try:
        import torch.distributed as dist
    except ImportError:
        return "not available (this torch has no torch.distributed)"
    if not dist.is_available():
        return "not available (this torch has no torch.distributed)"
    if "TUTTI" not in getattr(dist.Backend, "_plugins", {}):
        return "not registered (this torch cannot take a backend written in Python)"
    return None


def check(args):
    print(f"tutti {tutti.__version__}: {tt.path} (NCCL API {tutti.nccl_version}, "
          f"device executor: {'yes' if tutti.cuda else 'no, host memory only'})")
    try:
        import torch
    except ImportError as e:
        print(f"PyTorch: not importable by {sys.executable} ({e})")
        print("verdict: no PyTorch in this Python: nothing uses NCCL here")
        return 0
    c = torch._C
    has_nccl = hasattr(c, "_nccl_version")
    cuda = getattr(torch.version, "cuda", None)
    ndev = torch.cuda.device_count() if cuda else 0
    print(f"PyTorch {torch.__version__}: {os.path.dirname(torch.__file__)} "
          f"(CUDA {cuda or 'none'}, {ndev} device(s), NCCL {'built in' if has_nccl else 'none'})")
    libs = mapped_libraries()
    for p in libs:
        print(f"loaded: {_describe(p)}")
    prov = global_provider()
    if prov is not None:
        print(f"global scope's ncclCommInitRank: {prov[0] or '?'} "
              f"({'tutti' if prov[1] else 'not tutti'})")
    if has_nccl:
        print(f"torch.cuda.nccl.version(): {torch.cuda.nccl.version()}")

    cpu = _cpu_backend_state(torch)
    if cpu is None and not args.no_child:
        ok, out = _check_cpu_backend(args.timeout)
        print(f"tutti CPU backend (init_process_group(\"tutti\")): {'ok' if ok else 'FAILED'}"
              f"\n{out}")
        if not ok:
            print("verdict: FAILED: the tutti backend for CPU tensors does not work (above)")
            return 1
    elif cpu is not None:
        print(f"tutti CPU backend: {cpu}")

    banner = tutti_ver = None
    if not args.no_child:
        banner, tutti_ver, out, rc = _run_child(args.timeout)
        shown = "\n".join("  | " + line for line in out.strip().splitlines()[-12:])
        print(f"child with NCCL_DEBUG=VERSION (exit {rc}):\n{shown}")
        if rc != 0:
            print("verdict: FAILED: the child process failed (its output is above)")
            return 1
    nccl_files = [p for p in libs if os.path.basename(p).startswith("libnccl.so")]
    if not has_nccl:
        served = ("tutti is loaded and answers" + (f" ({banner})" if banner else "")
                  if tutti_ver is not None or args.no_child else "tutti did not answer")
        print(f"verdict: PyTorch {torch.__version__} is built without NCCL (CUDA: "
              f"{cuda or 'none'}): there is no NCCL in it for tutti to serve, and "
              f"torch.distributed's 'nccl' backend is unavailable. {served}. A CUDA build "
              "of PyTorch (the pip wheels) loads libnccl.so.2, which `import tutti.torch` "
              "replaces.")
        return 0
    if args.no_child:
        ok = bool(prov and prov[1])  # another file may be mapped, unused
    else:
        ok = tutti_ver is not None
    if ok:
        how = f", {banner}" if banner else ""
        print(f"verdict: PyTorch uses tutti ({tt.path}{how})")
        return 0
    others = [p for p in nccl_files if is_tutti(p) is False]
    if others:
        print(f"verdict: FAILED: PyTorch uses {', '.join(others)}"
              f"{f' ({banner})' if banner else ''}, not tutti")
    else:
        print("verdict: FAILED: PyTorch's NCCL calls do not reach tutti, and no other "
              "libnccl.so.2 is loaded: this PyTorch has NCCL linked into it, which tutti "
              "cannot replace in-process" + (f" ({banner})" if banner else ""))
    return 1


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m tutti.torch",
                                description="PyTorch on tutti: `import tutti.torch` before torch.")
    sub = p.add_subparsers(dest="cmd", metavar="check")
    c = sub.add_parser("check", help="say which NCCL library PyTorch uses in this process")
    c.add_argument("--no-child", action="store_true",
                   help="skip the NCCL_DEBUG=VERSION run in a child process")
    c.add_argument("--timeout", type=float, default=180,
                   help="seconds the child may take (default 180)")
    args = p.parse_args(argv)
    if args.cmd != "check":
        p.print_usage(sys.stderr)
        return 2
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
