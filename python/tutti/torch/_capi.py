"""tutti's C API through ctypes, for the CPU backend (_cpu.py): one
communicator over host buffers (stream NULL), its calls checked, and the
mapping from torch's dtypes and reduce ops to NCCL's."""
import ctypes

import torch
import torch.distributed as dist

from . import library as _lib

c_int, c_size_t, c_void_p = ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


class TuttiError(RuntimeError):
    """A tutti call failed; the message names the operation, the rank and
    tutti's own words (ncclGetLastError)."""


def _proto(name, *args):
    f = getattr(_lib, name)
    f.argtypes = list(args)
    f.restype = c_int
    return f


_get_unique_id = _proto("ncclGetUniqueId", ctypes.POINTER(UniqueId))
_init_rank = _proto("ncclCommInitRank", ctypes.POINTER(c_void_p), c_int, UniqueId, c_int)
_destroy = _proto("ncclCommDestroy", c_void_p)
_abort = _proto("ncclCommAbort", c_void_p)
_lib.ncclGetErrorString.restype = ctypes.c_char_p
_lib.ncclGetErrorString.argtypes = [c_int]
_lib.ncclGetLastError.restype = ctypes.c_char_p
_lib.ncclGetLastError.argtypes = [c_void_p]
group_start = _proto("ncclGroupStart")
group_end = _proto("ncclGroupEnd")
# (send, recv, count, type, [op,] [root,] comm, stream): plain ints pass
# through ctypes' converters without allocating, which keeps a call cheap.
P, S, I = c_void_p, c_size_t, c_int
all_reduce = _proto("ncclAllReduce", P, P, S, I, I, P, P)
broadcast = _proto("ncclBroadcast", P, P, S, I, I, P, P)
reduce = _proto("ncclReduce", P, P, S, I, I, I, P, P)
all_gather = _proto("ncclAllGather", P, P, S, I, P, P)
reduce_scatter = _proto("ncclReduceScatter", P, P, S, I, I, P, P)
all_to_all = _proto("ncclAlltoAll", P, P, S, I, P, P)
gather = _proto("ncclGather", P, P, S, I, I, P, P)
scatter = _proto("ncclScatter", P, P, S, I, I, P, P)
send = _proto("ncclSend", P, S, I, I, P, P)
recv = _proto("ncclRecv", P, S, I, I, P, P)

# ncclDataType_t. bool moves as bytes; complex as pairs of its real type.
INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, FLOAT32, FLOAT64, BFLOAT16 = range(10)
DTYPES = {
    torch.int8: INT8, torch.uint8: UINT8, torch.bool: UINT8, torch.int32: INT32,
    torch.int64: INT64, torch.float16: FLOAT16, torch.float32: FLOAT32,
    torch.float64: FLOAT64, torch.bfloat16: BFLOAT16,
}
for _name, _code in (("uint32", UINT32), ("uint64", UINT64), ("float8_e4m3fn", 10),
                     ("float8_e5m2", 11)):
    if hasattr(torch, _name):
        DTYPES[getattr(torch, _name)] = _code
COMPLEX = {torch.complex64: FLOAT32, torch.complex128: FLOAT64, torch.complex32: FLOAT16}

# ncclRedOp_t by torch's RedOpType; the others have no NCCL counterpart.
_R = dist.ReduceOp.RedOpType
REDOPS = {_R.SUM: 0, _R.PRODUCT: 1, _R.MAX: 2, _R.MIN: 3, _R.AVG: 4}


def redop(op, what, complex_=False, dtype=None):
    """ncclRedOp_t for torch's ReduceOp `op`, or TuttiError naming `what`."""
    kind = op.op if hasattr(op, "op") else op
    code = REDOPS.get(kind)
    if code is None:
        raise TuttiError(f"tutti: {what}: reduce op {kind.name} is not supported by tutti's "
                         "CPU backend (it has SUM, AVG, PRODUCT, MIN, MAX)")
    if complex_ and code not in (0, 4):
        raise TuttiError(f"tutti: {what}: {kind.name} of complex tensors is undefined "
                         "(SUM and AVG work on complex)")
    if dtype is torch.bool and code not in (2, 3):
        raise TuttiError(f"tutti: {what}: {kind.name} of bool tensors is not supported "
                         "(MIN and MAX are)")
    return code


class Comm:
    """One tutti communicator, made from a unique id that rank 0 publishes in
    torch's store (the store the process group gives its backend)."""

    def __init__(self, store, rank, size):
        uid = UniqueId()
        key = "tutti/unique_id"
        if rank == 0:
            self._check(_get_unique_id(ctypes.byref(uid)), "ncclGetUniqueId", None)
            store.set(key, ctypes.string_at(ctypes.addressof(uid), 128))
        else:
            ctypes.memmove(ctypes.addressof(uid), store.get(key), 128)
        comm = c_void_p()
        self.handle = None
        self.rank = rank
        self._check(_init_rank(ctypes.byref(comm), size, uid, rank), "ncclCommInitRank", None)
        self.handle = comm.value

    def check(self, rc, what):
        if rc != 0:
            self._check(rc, what, self.handle)

    def _check(self, rc, what, handle):
        if rc == 0:
            return
        text = _lib.ncclGetErrorString(rc).decode(errors="replace")
        last = _lib.ncclGetLastError(handle)
        detail = f": {last.decode(errors='replace')}" if last else ""
        raise TuttiError(f"tutti: {what} failed on rank {self.rank}: {text}{detail}")

    def close(self, abort=False):
        h, self.handle = self.handle, None
        if h is not None:
            (_abort if abort else _destroy)(h)


def unique_id():
    """A fresh ncclUniqueId's bytes (for tests and checks)."""
    uid = UniqueId()
    if _get_unique_id(ctypes.byref(uid)) != 0:
        raise TuttiError("tutti: ncclGetUniqueId failed")
    return ctypes.string_at(ctypes.addressof(uid), 128)
