"""What `import tutti.torch` does to libraries that need libnccl.so.2, with
stand-ins for PyTorch's libtorch_cuda.so (fake_torch.c, built twice, loaded
RTLD_LOCAL as Python loads torch) and NVIDIA's NCCL (fake_nccl.c, their
DT_NEEDED, found through their RUNPATH). Each case runs in a fresh process;
"torch imported" is a stand-in loaded plus a module named torch:

  without      no tutti.torch: the calls reach the stand-in NCCL (the stand-ins work)
  before       tutti.torch first: the calls reach tutti; the stand-in NCCL is never mapped
  after        torch imported, then tutti.torch: ImportError, too late
  other_first  a library with the stand-in NCCL loaded first, not torch: a warning,
               and a library loaded afterwards calls tutti
  global       the stand-in NCCL loaded RTLD_GLOBAL first: ImportError
  preload      after, but libtutti is LD_PRELOADed: tutti serves the calls, no error

usage: python switch_check.py FAKE_TORCH_SO FAKE_TORCH2_SO FAKE_NCCL_SO
"""
import json
import os
import subprocess
import sys

import tutti

CHILD = r"""
import ctypes, json, os, sys, types, warnings
fake, fake2, fake_nccl, case = sys.argv[1:5]
out = {}
def says(path):
    f = ctypes.CDLL(path).fake_torch_nccl_says
    f.restype = ctypes.c_char_p
    return f().decode()
if case in ("after", "preload", "other_first"):
    out["first_says"] = says(fake)
if case in ("after", "preload"):
    sys.modules["torch"] = types.ModuleType("torch")
if case == "global":
    ctypes.CDLL(fake_nccl, mode=os.RTLD_GLOBAL)
if case != "without":
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            import tutti.torch
        except ImportError as e:
            out["error"] = str(e)
    out["warnings"] = [str(x.message) for x in w]
if case in ("without", "before"):
    out["says"] = says(fake)
if case == "other_first":
    out["says"] = says(fake2)
from tutti._process import mapped_libraries
out["mapped"] = mapped_libraries()
print(json.dumps(out))
"""


def run(args, case, env=None):
    p = subprocess.run([sys.executable, "-c", CHILD] + args + [case], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env, timeout=60)
    if p.returncode != 0:
        return {"crash": p.stderr.decode(errors="replace")}
    return json.loads(p.stdout)


def main():
    args = [os.path.realpath(a) for a in sys.argv[1:4]]
    fake_nccl_dir = os.path.dirname(args[2])
    ours = os.path.realpath(tutti.nccl_library_path())

    def stand_in_mapped(o):
        return any(p.startswith(fake_nccl_dir + os.sep) for p in o.get("mapped", []))

    def nvidia(o, key="says"):
        return "NCCL developers" in o.get(key, "")

    def tutti_(o, key="says"):
        return "tutti developers" in o.get(key, "")

    preload = dict(os.environ, LD_PRELOAD=tutti.library_path())
    cases = [
        ("without", None, lambda o: nvidia(o) and stand_in_mapped(o)),
        ("before", None, lambda o: tutti_(o) and not stand_in_mapped(o)
         and ours in o.get("mapped", []) and "error" not in o and not o["warnings"]),
        ("after", None, lambda o: nvidia(o, "first_says")
         and "too late: torch was imported" in o.get("error", "")),
        ("other_first", None, lambda o: nvidia(o, "first_says") and tutti_(o)
         and "error" not in o and any("is loaded already" in w for w in o["warnings"])),
        ("global", None, lambda o: "global scope" in o.get("error", "")),
        ("preload", preload, lambda o: tutti_(o, "first_says") and "error" not in o),
    ]
    passed = failed = 0
    for name, env, good in cases:
        out = run(args, name, env)
        ok = good(out)
        passed += ok
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {json.dumps(out)}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
