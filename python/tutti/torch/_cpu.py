"""torch.distributed's `tutti` backend for CPU tensors: a c10d Backend written
in Python whose every operation is one call (or one group of calls) into
tutti's C API on host buffers. Registered by `import tutti.torch`.

Calls run to completion before they return, as Gloo's do from the caller's
view: a Work is done when it is handed back (though torch 2.15's wrapper
around a Python Work answers is_completed() False: it passes on wait() and
get_future() only). Point-to-point calls are the
exception: send and recv wait, unissued, until the next wait(), collective
or barrier, and then go as one group, so that isend/irecv pairs posted in
any order (batch_isend_irecv, rings) cannot deadlock."""
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import Backend as _C10dBackend
from torch._C._distributed_c10d import Work as _C10dWork
from torch.futures import Future

from . import _capi as C

NAME = "tutti"
# dtypes every reduce op takes as they are (bool and complex go the long way).
_PLAIN = {k: v for k, v in C.DTYPES.items() if k is not torch.bool}


class Work(_C10dWork):
    """Done when made (or, for point-to-point, when waited for)."""

    def __init__(self, result, backend=None):
        super().__init__()
        self._result = result
        self._backend = backend

    def wait(self, timeout=timedelta(0)):
        if self._backend is not None:
            self._backend._flush()
            self._backend = None
        return True

    def is_completed(self):
        return self._backend is None or not self._backend._pending

    def is_success(self):
        return self.is_completed()

    def get_future(self):
        self.wait()
        fut = Future()
        fut.set_result(self._result)
        return fut


class _Buf:
    """A tensor as tutti sees it: contiguous, complex as pairs of reals, with
    the way back to the caller's tensor when a copy was needed."""

    __slots__ = ("t", "orig", "ptr", "count", "dtype", "complex")

    def __init__(self, t, what, copy_in=True):
        if t.device.type != "cpu":
            raise C.TuttiError(f"tutti: {what}: tensor on {t.device}; the tutti backend takes "
                               "CPU tensors (for CUDA tensors use nccl after `import tutti.torch`)")
        if t.is_sparse:
            raise C.TuttiError(f"tutti: {what}: sparse tensors are not supported")
        self.orig = t
        self.complex = t.dtype in C.COMPLEX
        if not t.is_contiguous():
            t = t.contiguous() if copy_in else torch.empty_like(t, memory_format=torch.contiguous_format)
        if self.complex:
            self.dtype = C.COMPLEX[t.dtype]
            t = torch.view_as_real(t)
        else:
            self.dtype = C.DTYPES.get(t.dtype)
            if self.dtype is None:
                raise C.TuttiError(f"tutti: {what}: dtype {t.dtype} is not supported by tutti")
        self.t = t
        self.ptr = t.data_ptr()
        self.count = t.numel()

    def back(self):
        """Copies the result into the caller's tensor when it was not used directly."""
        t = torch.view_as_complex(self.t) if self.complex else self.t
        if t.data_ptr() != self.orig.data_ptr():
            self.orig.copy_(t)


def _one(tensors, what):
    if len(tensors) != 1:
        raise C.TuttiError(f"tutti: {what}: one tensor per call ({len(tensors)} given)")
    return tensors[0]


def _flat_like(tensors, what):
    """One contiguous tensor holding `tensors` end to end (they must be alike)."""
    t0 = tensors[0]
    for t in tensors:
        if t.dtype != t0.dtype or t.numel() != t0.numel():
            raise C.TuttiError(f"tutti: {what}: the tensors of a list must have one dtype "
                               "and one size")
    return torch.empty((len(tensors),) + tuple(t0.shape), dtype=t0.dtype)


class TuttiBackend(_C10dBackend):
    """c10d Backend on one tutti communicator."""

    # Plain attributes: c10d reads these through Python, and the base class's
    # properties would call back into the same lookup without end.
    supports_coalescing = False
    supports_splitting = False
    supports_shrinking = False
    supports_reconfigure = False
    supports_window = False
    _supports_time_estimate = False

    def __init__(self, store, rank, size, timeout=None):
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        self._comm = C.Comm(store, rank, size)
        self._h = self._comm.handle
        self._pending = []  # (is_send, _Buf, peer, tag, header)

    def getBackendName(self):
        return NAME

    # -- collectives --------------------------------------------------------

    def allreduce(self, tensors, opts):
        # The common call (one contiguous CPU tensor of a real type, an op
        # NCCL has) straight to the C call: this is the small-message cost.
        if len(tensors) == 1:
            t = tensors[0]
            dtype = _PLAIN.get(t.dtype)
            op = C.REDOPS.get(opts.reduceOp.op)
            if dtype is not None and op is not None and t.is_cpu and t.is_contiguous() \
                    and not t.is_sparse and not self._pending and self._h is not None:
                ptr = t.data_ptr()
                rc = C.all_reduce(ptr, ptr, t.numel(), dtype, op, self._h, None)
                if rc != 0:
                    self._comm.check(rc, "all_reduce")
                return Work(tensors)
        b = _Buf(_one(tensors, "all_reduce"), "all_reduce")
        op = C.redop(opts.reduceOp, "all_reduce", b.complex, b.orig.dtype)
        self._prologue()
        self._comm.check(C.all_reduce(b.ptr, b.ptr, b.count, b.dtype, op, self._h, None),
                         "all_reduce")
        b.back()
        return Work(tensors)

    def allreduce_coalesced(self, tensors, opts):
        for t in tensors:
            self.allreduce([t], opts)
        return Work(tensors)

    def broadcast(self, tensors, opts):
        b = _Buf(_one(tensors, "broadcast"), "broadcast")
        self._prologue()
        self._comm.check(C.broadcast(b.ptr, b.ptr, b.count, b.dtype, opts.rootRank, self._h,
                                     None), "broadcast")
        b.back()
        return Work(tensors)

    def reduce(self, tensors, opts):
        b = _Buf(_one(tensors, "reduce"), "reduce")
        op = C.redop(opts.reduceOp, "reduce", b.complex, b.orig.dtype)
        self._prologue()
        self._comm.check(C.reduce(b.ptr, b.ptr, b.count, b.dtype, op, opts.rootRank, self._h,
                                  None), "reduce")
        if self._rank == opts.rootRank:
            b.back()
        return Work(tensors)

    def all_gather_single(self, output, input, opts):
        i = _Buf(input, "all_gather_into_tensor")
        o = _Buf(output, "all_gather_into_tensor", copy_in=False)
        if o.count != i.count * self._size or o.dtype != i.dtype:
            raise C.TuttiError(f"tutti: all_gather_into_tensor: output of {output.numel()} "
                               f"{output.dtype} for {self._size} ranks' {input.numel()} "
                               f"{input.dtype}")
        self._prologue()
        self._comm.check(C.all_gather(i.ptr, o.ptr, i.count, i.dtype, self._h, None),
                         "all_gather_into_tensor")
        o.back()
        return Work(output)

    def allgather(self, outputs, inputs, opts):
        out = _one(outputs, "all_gather")
        inp = _one(inputs, "all_gather")
        if len(out) != self._size:
            raise C.TuttiError(f"tutti: all_gather: {len(out)} outputs for {self._size} ranks")
        flat = _flat_like(out, "all_gather")
        self.all_gather_single(flat, inp, opts)
        for k, t in enumerate(out):
            t.copy_(flat[k])
        return Work(outputs)

    def allgather_coalesced(self, outputs, inputs, opts):
        for out, inp in zip(outputs, inputs):
            self.allgather([out], [inp], opts)
        return Work(outputs)

    def reduce_scatter_single(self, output, input, opts):
        i = _Buf(input, "reduce_scatter_tensor")
        o = _Buf(output, "reduce_scatter_tensor", copy_in=False)
        if i.count != o.count * self._size or o.dtype != i.dtype:
            raise C.TuttiError(f"tutti: reduce_scatter_tensor: input of {input.numel()} "
                               f"{input.dtype} for {self._size} ranks' {output.numel()} "
                               f"{output.dtype}")
        op = C.redop(opts.reduceOp, "reduce_scatter_tensor", i.complex, input.dtype)
        self._prologue()
        self._comm.check(C.reduce_scatter(i.ptr, o.ptr, o.count, o.dtype, op, self._h, None),
                         "reduce_scatter_tensor")
        o.back()
        return Work(output)

    def reduce_scatter(self, outputs, inputs, opts):
        out = _one(outputs, "reduce_scatter")
        inp = _one(inputs, "reduce_scatter")
        if len(inp) != self._size:
            raise C.TuttiError(f"tutti: reduce_scatter: {len(inp)} inputs for {self._size} ranks")
        flat = _flat_like(inp, "reduce_scatter")
        for k, t in enumerate(inp):
            flat[k].copy_(t)
        self.reduce_scatter_single(out, flat, opts)
        return Work(outputs)

    def gather(self, outputs, inputs, opts):
        inp = _one(inputs, "gather")
        root = opts.rootRank
        i = _Buf(inp, "gather")
        flat = None
        if self._rank == root:
            out = _one(outputs, "gather")
            flat = _Buf(_flat_like(out, "gather"), "gather")
        self._prologue()
        self._comm.check(C.gather(i.ptr, flat.ptr if flat else None, i.count, i.dtype, root,
                                  self._h, None), "gather")
        if flat is not None:
            for k, t in enumerate(outputs[0]):
                t.copy_(flat.orig[k])
        return Work(outputs)

    def scatter(self, outputs, inputs, opts):
        root = opts.rootRank
        o = _Buf(_one(outputs, "scatter"), "scatter", copy_in=False)
        flat = None
        if self._rank == root:
            src = _one(inputs, "scatter")
            f = _flat_like(src, "scatter")
            for k, t in enumerate(src):
                f[k].copy_(t)
            flat = _Buf(f, "scatter")
        self._prologue()
        self._comm.check(C.scatter(flat.ptr if flat else None, o.ptr, o.count, o.dtype, root,
                                   self._h, None), "scatter")
        o.back()
        return Work(outputs)

    def all_to_all_single(self, output, input, output_splits, input_splits, opts):
        what = "all_to_all_single"
        i = _Buf(input, what)
        o = _Buf(output, what, copy_in=False)
        n = self._size
        if not output_splits and not input_splits:
            self._prologue()
            self._comm.check(C.all_to_all(i.ptr, o.ptr, i.count // n, i.dtype, self._h, None),
                             what)
            o.back()
            return Work(output)
        rows_in, rows_out = input.shape[0], output.shape[0]
        ins = list(input_splits) or [rows_in // n] * n
        outs = list(output_splits) or [rows_out // n] * n
        per_in = i.count // rows_in if rows_in else 0
        per_out = o.count // rows_out if rows_out else 0
        esz = i.t.element_size()
        self._grouped(what, [(True, i.ptr + sum(ins[:p]) * per_in * esz, ins[p] * per_in,
                              i.dtype, p) for p in range(n)] +
                      [(False, o.ptr + sum(outs[:p]) * per_out * esz, outs[p] * per_out,
                        o.dtype, p) for p in range(n)])
        o.back()
        return Work(output)

    def alltoall(self, outputs, inputs, opts):
        what = "all_to_all"
        ib = [_Buf(t, what) for t in inputs]
        ob = [_Buf(t, what, copy_in=False) for t in outputs]
        self._grouped(what, [(True, b.ptr, b.count, b.dtype, p) for p, b in enumerate(ib)] +
                      [(False, b.ptr, b.count, b.dtype, p) for p, b in enumerate(ob)])
        for b in ob:
            b.back()
        return Work(outputs)

    def barrier(self, opts):
        self._prologue()
        one = torch.zeros(1, dtype=torch.uint8)
        self._comm.check(C.all_reduce(one.data_ptr(), one.data_ptr(), 1, C.UINT8, 0, self._h,
                                      None), "barrier")
        return Work([])

    # -- point to point -----------------------------------------------------

    def send(self, tensors, dst, tag):
        b = _Buf(_one(tensors, "send"), "send")
        hdr = torch.tensor([tag, b.count * b.t.element_size()], dtype=torch.int64)
        self._pending.append((True, b, dst, tag, hdr))
        return Work(tensors, self)

    def recv(self, tensors, src, tag):
        b = _Buf(_one(tensors, "recv"), "recv", copy_in=False)
        hdr = torch.full((2,), -1, dtype=torch.int64)
        self._pending.append((False, b, src, tag, hdr))
        return Work(tensors, self)

    def recv_anysource(self, tensors, tag):
        raise C.TuttiError("tutti: recv from any source is not supported by tutti's CPU "
                           "backend: name the source rank")

    def _flush(self):
        """Issues the pending sends and receives as one group. Each message
        carries its tag and size ahead of it: tutti matches a peer's messages
        in order, and a tag out of that order is an error, not a reordering."""
        if not self._pending:
            return
        ops, self._pending = self._pending, []
        calls = []
        for is_send, b, peer, tag, hdr in ops:
            calls.append((is_send, hdr.data_ptr(), 2, C.INT64, peer))
            calls.append((is_send, b.ptr, b.count, b.dtype, peer))
        self._grouped("send/recv", calls)
        for is_send, b, peer, tag, hdr in ops:
            if is_send:
                continue
            got_tag, got_bytes = hdr.tolist()
            want = b.count * b.t.element_size()
            if got_tag != tag or got_bytes != want:
                raise C.TuttiError(
                    f"tutti: recv from rank {peer} with tag {tag} ({want} bytes) met a message "
                    f"sent with tag {got_tag} ({got_bytes} bytes): tutti's CPU backend matches "
                    "a peer's sends and receives in the order they are posted, and their tags "
                    "and sizes must agree in that order")
            b.back()

    def _grouped(self, what, calls):
        """One ncclGroupStart/End around (is_send, ptr, count, dtype, peer) calls."""
        self._prologue()
        h = self._h
        C.group_start()
        rc = 0
        for is_send, ptr, count, dtype, peer in calls:
            rc = (C.send if is_send else C.recv)(ptr, count, dtype, peer, h, None)
            if rc != 0:
                break
        end = C.group_end()
        self._comm.check(rc or end, what)

    def _prologue(self):
        if self._h is None:
            raise C.TuttiError("tutti: the process group was shut down")
        if self._pending:
            self._flush()

    # -- life ---------------------------------------------------------------

    def shutdown(self):
        self._pending = []
        self._comm.close()
        self._h = None

    def abort(self):
        self._pending = []
        self._comm.close(abort=True)
        self._h = None


def _create(store, rank, size, timeout):
    return TuttiBackend(store, rank, size, timeout)


def register():
    """Registers the `tutti` backend for CPU tensors with torch.distributed
    (once; `import tutti.torch` calls it when torch.distributed is there)."""
    if NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(NAME, _create, devices=["cpu"])
