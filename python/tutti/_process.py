"""Which NCCL-API libraries this process has loaded, and which one its
nccl* symbols resolve to. Each library is asked who it is through a call
with no side effects: tutti's ncclGetErrorString(ncclInternalError) names
the tutti developers where NVIDIA's names the NCCL developers."""
import ctypes
import os

_NCCL_INTERNAL_ERROR = 3


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def _dladdr():
    # glibc 2.34 moved dladdr into libc; before, it is in libdl.
    for lib in (None, "libdl.so.2"):
        try:
            f = ctypes.CDLL(lib).dladdr
        except (OSError, AttributeError):
            continue
        f.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        f.restype = ctypes.c_int
        return f
    return None


def _is_nccl_name(base):
    return base.startswith("libnccl.so") or base.startswith("libtutti.so")


def mapped_libraries():
    """Real paths of the files named like NCCL or tutti libraries
    (libnccl.so*, libtutti.so*) mapped into this process, in map order."""
    seen = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) < 6 or not parts[5].startswith("/"):
                    continue
                path = parts[5].rstrip("\n")
                if path.endswith(" (deleted)"):
                    path = path[: -len(" (deleted)")]
                if _is_nccl_name(os.path.basename(path)) and path not in seen:
                    seen.append(path)
    except OSError:
        pass
    return seen


def _says_tutti(get_error_string):
    get_error_string.argtypes = [ctypes.c_int]
    get_error_string.restype = ctypes.c_char_p
    text = get_error_string(_NCCL_INTERNAL_ERROR) or b""
    return b"tutti" in text


def is_tutti(path):
    """Whether the loaded library at path is tutti: True, False, or None when
    it is not loaded or has no ncclGetErrorString."""
    try:
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LOCAL)
        return _says_tutti(lib.ncclGetErrorString)
    except (OSError, AttributeError):
        return None


def global_provider(symbol="ncclCommInitRank"):
    """(path, is_tutti) of the object whose symbol the process's global scope
    resolves to: what a library loaded later (libtorch_cuda.so) binds its
    nccl* calls to first. None when no global object exports it."""
    scope = ctypes.CDLL(None)
    try:
        fn = getattr(scope, symbol)
        ges = scope.ncclGetErrorString
    except AttributeError:
        return None
    path = None
    dladdr = _dladdr()
    if dladdr is not None:
        info = _DlInfo()
        if dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info)) and info.dli_fname:
            path = os.path.realpath(os.fsdecode(info.dli_fname))
    return path, _says_tutti(ges)
