#!/usr/bin/env bash
# The Python package's tests (tests.cmake), one step per ctest test:
#   python_test.sh wheel       SRC WORK PYTHON   build a CPU-only wheel from SRC, install it into WORK/venv
#   python_test.sh tools       SRC WORK          console scripts, paths, the C API through ctypes
#   python_test.sh torch       SRC WORK PYTHON   python -m tutti.torch check, PYTHON's site-packages visible
#   python_test.sh switch      SRC WORK FAKE_TORCH FAKE_TORCH2 FAKE_NCCL   import order, stand-in libraries
#   python_test.sh pip_install SRC WORK PYTHON   pip install SRC into a fresh venv
#   python_test.sh torch_pypi  SRC WORK PYTHON VERSION   PyTorch VERSION from PyPI (its CUDA
#                              wheels, ~3 GB, kept in ~/.cache/tutti) imports on tutti
#   python_test.sh torch_cpu   SRC WORK VERSION   the `tutti` CPU backend against Gloo
#                              (torch_cpu.py) in python.torch_pypi's environment
# Exits 77 (skipped) when PYTHON cannot make a virtual environment with pip
# and python3-venv cannot be installed (not root, or no apt-get).
set -uo pipefail
# Nothing written into the checkout: no __pycache__ beside the sources run
# from it (switch_check.py, fake_torch_pkg).
export PYTHONDONTWRITEBYTECODE=1
step=$1 src=$2 work=$3
shift 3
# Each step writes its files in its own directory: the steps after
# python.wheel may run at the same time.
mkdir -p "$work/run-$step"
cd "$work/run-$step" || exit 1
whl_dir=$work/dist
venv=$work/venv

fail() {
  echo "FAILED: $*"
  exit 1
}

# make_venv PYTHON DIR [--system-site-packages]: a fresh virtual environment
# with pip. Debian keeps venv's pip (ensurepip) in python3-venv.
make_venv() {
  local py=$1 dir=$2
  shift 2
  rm -rf "$dir"
  if "$py" -m venv "$@" "$dir" >"$dir.log" 2>&1 && "$dir/bin/python" -m pip --version >/dev/null 2>&1; then
    return 0
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    local v
    v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    echo "installing python3-venv (python$v-venv): $py cannot make a virtual environment with pip"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq python3-venv "python$v-venv" >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq python3-venv "python$v-venv" >/dev/null 2>&1; }
    rm -rf "$dir"
    if "$py" -m venv "$@" "$dir" >"$dir.log" 2>&1 && "$dir/bin/python" -m pip --version >/dev/null 2>&1; then
      return 0
    fi
  fi
  cat "$dir.log"
  echo "SKIPPED: $py cannot make a virtual environment with pip (Debian: apt-get install python3-venv, as root)"
  exit 77
}

# pip_build PIP_COMMAND...: a pip step that builds tutti, with build isolation
# (scikit-build-core comes from PyPI), CPU-only, into WORK/build.
pip_build() {
  local log=$work/pip-build.log
  CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
    "$@" -C build-dir="$work/build" -C cmake.define.TUTTI_CUDA=OFF >"$log" 2>&1
  local rc=$?
  if [ $rc != 0 ]; then
    tail -n 40 "$log"
    if grep -qiE "No matching distribution found for scikit-build-core|Could not find a version that satisfies the requirement scikit-build-core|NewConnectionError|Temporary failure in name resolution|Network is unreachable|ProxyError|SSLError" "$log"; then
      fail "pip could not fetch scikit-build-core from PyPI: building the package needs the network (build isolation)"
    fi
    fail "pip failed (exit $rc), full output in $log"
  fi
}

wheel_file() {
  local f
  f=$(ls "$whl_dir"/tutti-*-py3-none-linux_*.whl 2>/dev/null | head -n 1)
  [ -n "$f" ] || fail "no py3-none-linux_* wheel in $whl_dir: $(ls "$whl_dir" 2>/dev/null)"
  echo "$f"
}

case $step in
  wheel)
    py=$1
    make_venv "$py" "$venv"
    rm -rf "$whl_dir" "$work/unpacked"
    before=$(git -C "$src" status --porcelain 2>/dev/null)
    start=$SECONDS
    pip_build "$venv/bin/python" -m pip wheel --no-deps "$src" -w "$whl_dir"
    echo "wheel built in $((SECONDS - start)) s"
    after=$(git -C "$src" status --porcelain 2>/dev/null)
    [ "$before" = "$after" ] || fail "building the wheel changed the source tree: $after"
    whl=$(wheel_file)
    echo "$(basename "$whl"):"
    "$venv/bin/python" - "$whl" "$work/unpacked" <<'EOF' || exit 1
import stat, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = set(z.namelist())
for i in z.infolist():
    print(f"  {oct(i.external_attr >> 16)[-3:]} {i.file_size:>9} {i.filename}")
want = ["tutti/__init__.py", "tutti/_build.py", "tutti/torch/__init__.py", "tutti/torch/__main__.py",
        "tutti/lib/libtutti.so.0", "tutti/lib/libnccl.so.2", "tutti/include/nccl.h"] + \
       [f"tutti/bin/{t}" for t in ("tuttirun", "tutti-perf", "tutti-check", "tutti-ras",
                                   "tutti-plot")]
missing = [w for w in want if w not in names]
extra = [n for n in names if "/test" in n or n.endswith(".a") or n.endswith(".in")]
execs = [n for n in want if "/bin/" in n]
notx = [n for n in execs if n in names and not (z.getinfo(n).external_attr >> 16) & stat.S_IXUSR]
if missing or extra or notx:
    sys.exit(f"FAILED: wheel: missing {missing}, unexpected {extra}, not executable {notx}")
z.extractall(sys.argv[2])
EOF
    # The tools find the libraries beside them (RUNPATH $ORIGIN/../lib); the
    # libraries need none.
    if command -v readelf >/dev/null 2>&1; then
      for t in tuttirun tutti-perf tutti-check; do
        readelf -d "$work/unpacked/tutti/bin/$t" | grep -q 'R.*PATH.*\[\$ORIGIN/\.\./lib\]' ||
          fail "tutti/bin/$t: RUNPATH is not \$ORIGIN/../lib: $(readelf -d "$work/unpacked/tutti/bin/$t" | grep PATH)"
      done
      for l in libtutti.so.0 libnccl.so.2; do
        readelf -d "$work/unpacked/tutti/lib/$l" | grep -q "SONAME.*\[$l\]" || fail "tutti/lib/$l: soname"
        ! readelf -d "$work/unpacked/tutti/lib/$l" | grep -q 'R.*PATH' || fail "tutti/lib/$l has an RPATH"
      done
    fi
    "$venv/bin/python" -m pip install --no-index --force-reinstall "$whl" >"$work/pip-install.log" 2>&1 ||
      { cat "$work/pip-install.log"; fail "pip install of the wheel"; }
    echo "python.wheel: built and installed into $venv"
    ;;

  tools)
    [ -x "$venv/bin/python" ] || fail "no venv at $venv: python.wheel did not run"
    export PATH=$venv/bin:$PATH
    py=$venv/bin/python
    lib=$("$py" -c 'import tutti; print(tutti.library_path())') || fail "import tutti"
    echo "tutti.library_path(): $lib"
    case $lib in "$venv"/*/tutti/lib/libtutti.so.0) ;; *) fail "library_path() is not inside the venv's package" ;; esac
    "$py" -c '
import os, tutti
assert tutti.__version__ and tutti.nccl_version == "2.32.6", tutti.nccl_version
for p in (tutti.library_path(), tutti.nccl_library_path(), tutti.include_dir()):
    assert os.path.exists(p), p
for t in tutti.TOOLS:
    assert os.access(tutti.bin_path(t), os.X_OK), t
try:
    tutti.bin_path("no-such-tool")
    raise SystemExit("bin_path accepted an unknown name")
except ValueError:
    pass
print("tutti", tutti.__version__, "cuda:", tutti.cuda)' || fail "the module tutti"

    tuttirun --help >help.txt 2>&1 || fail "tuttirun --help: $(cat help.txt)"
    grep -q "^usage: tuttirun" help.txt || fail "tuttirun --help: $(cat help.txt)"
    echo "tuttirun --help: ok"

    tutti-perf allreduce -t 2 -b 8 -e 1M -f 4 -c 1 --json perf.json >perf.txt 2>&1
    rc=$?
    cat perf.txt
    [ $rc = 0 ] && grep -q "Out of bounds values : 0 OK" perf.txt || fail "tutti-perf (exit $rc)"
    grep -q "^# Library: tutti .*$venv/.*/tutti/lib/libtutti.so.0" perf.txt ||
      fail "tutti-perf did not load the package's libtutti.so.0"
    tutti-plot perf.json -o perf.svg --no-png && grep -q '</svg>' perf.svg || fail "tutti-plot"
    echo "tutti-plot: ok"
    tutti-check --quiet >check.txt 2>&1
    rc=$?
    cat check.txt
    [ $rc = 0 ] && grep -q "^tutti-check: OK" check.txt || fail "tutti-check (exit $rc)"

    # The C API through ctypes, against the NCCL-soname library: one rank,
    # then two processes started by tuttirun.
    cat >capi.py <<'EOF'
import ctypes, os, sys
import tutti
lib = ctypes.CDLL(tutti.nccl_library_path())
v = ctypes.c_int()
assert lib.ncclGetVersion(ctypes.byref(v)) == 0 and v.value == 23206, v.value

class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]

lib.ncclCommInitRank.argtypes = [ctypes.c_void_p, ctypes.c_int, UniqueId, ctypes.c_int]
lib.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                              ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
uid, comm = UniqueId(), ctypes.c_void_p()
assert lib.ncclGetUniqueId(ctypes.byref(uid)) == 0
assert lib.ncclCommInitRank(ctypes.byref(comm), world, uid, rank) == 0
n = 4096
send = (ctypes.c_float * n)(*[float(i % 97) * (rank + 1) for i in range(n)])
recv = (ctypes.c_float * n)()
assert lib.ncclAllReduce(send, recv, n, 7, 0, comm, None) == 0  # ncclFloat32, ncclSum
k = world * (world + 1) // 2
bad = sum(recv[i] != float(i % 97) * k for i in range(n))
assert lib.ncclCommDestroy(comm) == 0
print(f"rank {rank}/{world}: ncclGetVersion {v.value}, allreduce of {n} floats: {bad} wrong")
sys.exit(1 if bad else 0)
EOF
    "$py" capi.py || fail "the C API through ctypes, one rank"
    tuttirun -n 2 "$py" capi.py || fail "the C API through ctypes, two ranks under tuttirun"
    echo "python.tools: ok"
    ;;

  torch)
    tpy=$1
    make_venv "$tpy" "$work/venv-torch" --system-site-packages
    "$work/venv-torch/bin/python" -m pip install --no-index "$(wheel_file)" >"$work/pip-torch.log" 2>&1 ||
      { cat "$work/pip-torch.log"; fail "pip install of the wheel into $work/venv-torch"; }
    "$work/venv-torch/bin/python" -m tutti.torch check >torch-check.txt 2>&1
    rc=$?
    cat torch-check.txt
    [ $rc = 0 ] || fail "python -m tutti.torch check exited $rc"
    grep -q "^verdict: " torch-check.txt || fail "no verdict"
    # Only a PyTorch with NCCL can show that tutti serves it: without torch,
    # or with one built without NCCL, the check has nothing to prove.
    if ! "$work/venv-torch/bin/python" -c 'import torch' 2>/dev/null; then
      echo "SKIPPED: no PyTorch for $tpy (python.torch_pypi checks today's)"
      exit 77
    fi
    if grep -qE "^verdict: PyTorch .* is built without NCCL" torch-check.txt; then
      echo "SKIPPED: this PyTorch is built without NCCL (python.torch_pypi checks today's)"
      exit 77
    fi
    grep -qE "^verdict: PyTorch uses tutti" torch-check.txt || fail "unexpected verdict"
    grep -q "NCCL version 2.32.6 (tutti " torch-check.txt || fail "the child printed no tutti banner"
    echo "python.torch_check: ok"
    ;;

  switch)
    [ -x "$venv/bin/python" ] || fail "no venv at $venv: python.wheel did not run"
    "$venv/bin/python" "$src/tests/python/switch_check.py" "$@" || fail "import order"
    # The check's verdict for a PyTorch with NCCL, through a stand-in torch
    # whose NCCL calls go through the stand-in libtorch_cuda.so.
    for flag in "" --no-child; do
      FAKE_TORCH_SO=$1 PYTHONPATH=$src/tests/python/fake_torch_pkg \
        "$venv/bin/python" -m tutti.torch check $flag >check.txt 2>&1
      rc=$?
      cat check.txt
      [ $rc = 0 ] && grep -q "^verdict: PyTorch uses tutti" check.txt ||
        fail "python -m tutti.torch check $flag with a stand-in torch (exit $rc)"
      [ -n "$flag" ] || grep -q "^  | NCCL version 2.32.6 (tutti " check.txt ||
        fail "python -m tutti.torch check: no tutti banner from the child"
    done
    # ... and for one whose NCCL is not tutti's.
    FAKE_TORCH_SO=$3 PYTHONPATH=$src/tests/python/fake_torch_pkg \
      "$venv/bin/python" -m tutti.torch check >check.txt 2>&1
    rc=$?
    cat check.txt
    [ $rc = 1 ] && grep -q "^verdict: FAILED: PyTorch uses .*/libnccl.so.2, not tutti" check.txt ||
      fail "python -m tutti.torch check with a stand-in torch on another NCCL (exit $rc)"
    echo "python.switch: ok"
    ;;

  torch_pypi)
    # Today's PyTorch from PyPI, with the NCCL it pins, on a machine without a
    # GPU: `import tutti.torch` first, then `import torch` must bind every
    # nccl* symbol libtorch_cuda.so imports to tutti (a missing one fails
    # the import), and the check must find tutti serving its NCCL calls.
    py=$1 version=$2
    cache=${TUTTI_CACHE:-${HOME:-/tmp}/.cache/tutti}
    wheels=$cache/torch-$version
    mkdir -p "$wheels" || fail "cannot make $wheels"
    tv=$work/venv-torch-$version
    make_venv "$py" "$tv"
    if ! "$tv/bin/python" -m pip install -q --no-index --find-links "$wheels" "torch==$version" \
      >"$work/pip-torch-$version.log" 2>&1; then
      echo "fetching torch==$version and its CUDA wheels from PyPI into $wheels (once)"
      start=$SECONDS
      for try in 1 2 3; do
        "$tv/bin/python" -m pip download -q -d "$wheels" "torch==$version" \
          >"$work/pip-torch-$version.log" 2>&1 && break
        [ $try = 3 ] && { tail -n 20 "$work/pip-torch-$version.log"; fail "pip download torch==$version"; }
        sleep 10
      done
      echo "fetched in $((SECONDS - start)) s: $(du -sh "$wheels" | cut -f1)"
      "$tv/bin/python" -m pip install -q --no-index --find-links "$wheels" "torch==$version" \
        >"$work/pip-torch-$version.log" 2>&1 ||
        { tail -n 20 "$work/pip-torch-$version.log"; fail "pip install torch==$version"; }
    fi
    "$tv/bin/python" -m pip install -q --no-index --no-deps "$(wheel_file)" >>"$work/pip-torch-$version.log" 2>&1 ||
      { tail -n 20 "$work/pip-torch-$version.log"; fail "pip install of tutti's wheel into $tv"; }
    site=$("$tv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    tcuda=$site/torch/lib/libtorch_cuda.so
    [ -f "$tcuda" ] || fail "torch==$version has no $tcuda (not a CUDA build?)"
    nm -D --undefined-only "$tcuda" | grep -o 'nccl[A-Za-z0-9_]*' | sort -u >torch-nccl.txt
    tlib=$("$tv/bin/python" -c 'import tutti; print(tutti.nccl_library_path())')
    nm -D --defined-only "$tlib" | awk '{print $3}' | sort -u >tutti-nccl.txt
    missing=$(comm -23 torch-nccl.txt tutti-nccl.txt)
    echo "libtorch_cuda.so of torch $version imports $(wc -l <torch-nccl.txt) NCCL functions"
    [ -z "$missing" ] || fail "tutti lacks $(echo $missing) that torch $version imports"
    "$tv/bin/python" - "$version" <<'PYEOF' || fail "import tutti.torch; import torch"
import sys
import tutti.torch
import torch
assert torch.__version__.split("+")[0] == sys.argv[1], torch.__version__
v = torch.cuda.nccl.version()
print("torch", torch.__version__, "imported on tutti; built with NCCL", v)
import torch.distributed as dist
assert dist.is_nccl_available()
PYEOF
    "$tv/bin/python" -m tutti.torch check >torch-check.txt 2>&1
    rc=$?
    cat torch-check.txt
    [ $rc = 0 ] && grep -q "^verdict: PyTorch uses tutti" torch-check.txt ||
      fail "python -m tutti.torch check on torch $version (exit $rc)"
    grep -q "NCCL version 2.32.6 (tutti " torch-check.txt || fail "the child printed no tutti banner"
    grep -q '^tutti CPU backend (init_process_group("tutti")): ok' torch-check.txt ||
      fail "python -m tutti.torch check did not run the tutti CPU backend's all_reduce"
    echo "python.torch_pypi: ok (torch $version)"
    ;;

  torch_cpu)
    # torch.distributed's `tutti` backend on CPU tensors against Gloo, in the
    # environment python.torch_pypi made (torch from PyPI, tutti's wheel).
    version=$1
    tv=$work/venv-torch-$version
    if ! [ -x "$tv/bin/python" ] || ! "$tv/bin/python" -c 'import torch' 2>/dev/null; then
      echo "SKIPPED: no PyTorch $version in $tv (python.torch_pypi makes it): the tutti CPU backend is NOT tested"
      exit 77
    fi
    # The *_object collectives go through numpy, which torch does not pull in.
    if ! "$tv/bin/python" -c 'import numpy' 2>/dev/null; then
      cache=${TUTTI_CACHE:-${HOME:-/tmp}/.cache/tutti}/torch-$version
      "$tv/bin/python" -m pip install -q --no-index --find-links "$cache" numpy >/dev/null 2>&1 ||
        { "$tv/bin/python" -m pip download -q -d "$cache" numpy >"$work/pip-numpy.log" 2>&1 &&
          "$tv/bin/python" -m pip install -q --no-index --find-links "$cache" numpy; } ||
        { tail -n 20 "$work/pip-numpy.log"; fail "pip install numpy into $tv"; }
    fi
    "$tv/bin/python" -W ignore::UserWarning "$src/tests/python/torch_cpu.py" ||
      fail "the tutti CPU backend (torch_cpu.py)"
    echo "python.torch_cpu: ok (torch $version)"
    ;;

  pip_install)
    py=$1
    make_venv "$py" "$work/venv-dot"
    start=$SECONDS
    pip_build "$work/venv-dot/bin/python" -m pip install "$src"
    echo "pip install $src: $((SECONDS - start)) s"
    "$work/venv-dot/bin/python" -c '
import os, tutti
assert os.path.exists(tutti.nccl_library_path())
print("tutti", tutti.__version__, tutti.library_path())' || fail "import tutti after pip install"
    "$work/venv-dot/bin/tutti-perf" broadcast -t 2 -b 8 -e 64K -f 8 -c 1 >perf.txt 2>&1 &&
      grep -q "Out of bounds values : 0 OK" perf.txt || { cat perf.txt; fail "tutti-perf after pip install"; }
    echo "python.pip_install: ok"
    ;;

  *)
    fail "unknown step $step"
    ;;
esac
