"""Makes PyTorch in this process use tutti as its NCCL. Import it before torch:

    import tutti.torch
    import torch

It loads the package's libnccl.so.2 (tutti under NCCL's soname) with
RTLD_GLOBAL. PyTorch's CUDA library (libtorch_cuda.so) needs libnccl.so.2;
when it loads, the dynamic linker finds an object with that soname already
loaded and uses it instead of NVIDIA's, and tutti's nccl* symbols come first
in the process's global scope. Nothing is installed or replaced on disk, and
no LD_PRELOAD is needed.

Too late: when torch was imported first and loaded a libnccl.so.2 that is
not tutti, PyTorch is bound to it for the life of the process, and importing
this module raises ImportError saying so; as it does when another NCCL sits
in the global scope (loaded with RTLD_GLOBAL), where torch would bind to it.
Another NCCL loaded privately (RTLD_LOCAL, e.g. by a library imported before)
stays with that library, with a warning; torch imported afterwards still uses
tutti. When torch was imported first but loaded no libnccl.so.2 (a CPU-only
build, or NCCL linked in) the import succeeds, warning in the second case,
since tutti cannot replace NCCL linked into torch.

It also registers torch.distributed's `tutti` backend for CPU tensors
(`init_process_group("cpu:tutti,cuda:nccl")`, _cpu.py) when torch is there.

`python -m tutti.torch check` says which library serves PyTorch's NCCL.
"""
import ctypes
import os
import sys
import warnings

from .. import nccl_library_path
from .._process import global_provider, is_tutti, mapped_libraries

#: The path of the library this module loaded.
path = os.path.realpath(nccl_library_path())


def _check_order():
    """Raises ImportError when PyTorch could no longer be switched to tutti."""
    foreign = [p for p in mapped_libraries() if p != path and is_tutti(p) is False]
    provider = global_provider()
    if provider is not None and provider[1]:
        return  # tutti is first in the global scope already (LD_PRELOAD)
    hint = ("Put `import tutti.torch` before `import torch` (first in the program), or run "
            f"with LD_PRELOAD={path}")
    if provider is not None:
        raise ImportError(
            f"tutti.torch: too late: {provider[0] or 'a library'} (not tutti) is loaded into the "
            "global scope: every library loaded from now on, torch included, binds its nccl* "
            f"calls to it. {hint}")
    if not foreign:
        return
    if "torch" in sys.modules:
        raise ImportError(
            f"tutti.torch: too late: torch was imported before tutti.torch and loaded "
            f"{', '.join(foreign)}, which is not tutti: PyTorch's NCCL calls go there for the "
            f"life of this process. {hint}")
    warnings.warn(
        f"tutti.torch: {', '.join(foreign)} (not tutti) is loaded already: the libraries "
        "loaded with it keep calling it; PyTorch, imported from now on, will use tutti",
        RuntimeWarning, stacklevel=3)


def _warn_if_static_nccl():
    if any(os.path.basename(p).startswith("libnccl.so") for p in mapped_libraries()):
        return
    torch = sys.modules.get("torch")
    c = getattr(torch, "_C", None)
    if c is not None and hasattr(c, "_nccl_version"):
        warnings.warn(
            "tutti.torch: torch was imported first and has NCCL linked into it (no libnccl.so.2 "
            "is loaded): tutti cannot serve its NCCL calls in this process",
            RuntimeWarning,
            stacklevel=3,
        )


_check_order()
if "torch" in sys.modules:
    _warn_if_static_nccl()

#: The loaded library (ctypes handle): tutti's C API, as PyTorch sees it.
library = ctypes.CDLL(path, mode=os.RTLD_GLOBAL)


def _register_cpu_backend():
    """torch.distributed's `tutti` backend for CPU tensors (_cpu.py), where
    this torch can take a backend written in Python (torch 2.x: c10d's
    Backend class and register_backend's `devices`)."""
    try:
        import inspect

        import torch.distributed as dist
        if not dist.is_available() or "devices" not in inspect.signature(
                dist.Backend.register_backend).parameters:
            return
        from . import _cpu
    except ImportError:
        return  # no torch, or one without torch.distributed
    _cpu.register()


# After the library: importing torch now binds its NCCL to tutti.
_register_cpu_backend()
