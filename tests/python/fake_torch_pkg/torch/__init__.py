"""A stand-in for a CUDA build of PyTorch, as much of it as
`python -m tutti.torch check` looks at: its NCCL calls go through
FAKE_TORCH_SO, either libtutti_py_fake_torch.so, which needs libnccl.so.2
as libtorch_cuda.so does, or an NCCL library itself, loaded privately by
path (as a torch with NCCL of its own would call it). No GPU."""
import ctypes
import os

__version__ = "0.0+fake"
_lib = ctypes.CDLL(os.environ["FAKE_TORCH_SO"])


class version:
    cuda = "12.0"


class _C:
    @staticmethod
    def _nccl_version():
        v = ctypes.c_int()
        f = getattr(_lib, "fake_torch_nccl_version", None) or _lib.ncclGetVersion
        f(ctypes.byref(v))
        return v.value


class cuda:
    @staticmethod
    def device_count():
        return 0

    @staticmethod
    def is_available():
        return False

    class nccl:
        @staticmethod
        def version():
            v = _C._nccl_version()
            return (v // 10000, v // 100 % 100, v % 100)
