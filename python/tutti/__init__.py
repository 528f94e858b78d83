"""tutti, a collective-communication library with NCCL's C API and ABI,
packaged for Python: the libraries and tools the package carries, and where
they are. `import tutti.torch` (before torch) makes PyTorch use it.

    tutti.library_path()        # .../tutti/lib/libtutti.so.0
    tutti.nccl_library_path()   # .../tutti/lib/libnccl.so.2, the same library under NCCL's soname
    tutti.bin_path("tutti-perf")
"""
import os

try:
    from . import _build
except ImportError as e:  # the sources without a build (python/ on sys.path)
    raise ImportError(
        "tutti: this copy of the package was not built (no tutti/_build.py): install it with "
        "`pip install .` from the tutti checkout, or a wheel (docs/python.md)"
    ) from e

__version__ = _build.version
#: The NCCL version the library implements and reports (ncclGetVersion).
nccl_version = _build.nccl_version
#: Whether the libraries were built with the device executor (CUDA buffers).
cuda = _build.cuda

#: The programs the package carries (also installed as console scripts).
TOOLS = ("tuttirun", "tutti-perf", "tutti-check", "tutti-plot")

_HERE = os.path.dirname(os.path.abspath(__file__))


def _existing(path, what):
    if not os.path.exists(path):
        raise FileNotFoundError(f"tutti: {what} is missing from the package ({path}): reinstall it")
    return path


def library_path():
    """The path of the package's libtutti.so.0."""
    return _existing(os.path.join(_HERE, _build.libdir, _build.libtutti), "libtutti")


def nccl_library_path():
    """The path of the package's libnccl.so.2: tutti under NCCL's soname, which
    programs linked against NVIDIA's NCCL load in its place."""
    return _existing(os.path.join(_HERE, _build.libdir, _build.libnccl), "libnccl")


def library_dir():
    """The directory holding both libraries (for LD_LIBRARY_PATH)."""
    return os.path.join(_HERE, _build.libdir)


def include_dir():
    """The directory holding nccl.h, to compile against the packaged library."""
    return os.path.join(_HERE, _build.includedir)


def bin_path(name):
    """The path of one of the bundled programs (see TOOLS)."""
    if name not in TOOLS:
        raise ValueError(f"tutti: no program {name!r} in the package; it has {', '.join(TOOLS)}")
    return _existing(os.path.join(_HERE, _build.bindir, name), name)
