#!/usr/bin/env bash
# Lists the GPU code in a built library and checks it against what packages
# carry (cmake/cuda_arch.cmake): machine code for sm_80, 86, 89, 90, 100 and
# 120, and PTX for the newest. Needs cuobjdump (the CUDA toolkit's, or the
# PyPI wheel nvidia-cuda-cuobjdump).
#   bash scripts/check-gpu-archs.sh build/libtutti.so.0
set -euo pipefail
lib=${1:?usage: check-gpu-archs.sh LIBRARY}
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || true)}
if [ -z "$cuobjdump" ]; then
  echo "no cuobjdump: install the CUDA toolkit's, or pip install nvidia-cuda-cuobjdump and set CUOBJDUMP" >&2
  exit 2
fi
archs() { "$cuobjdump" "$1" "$lib" 2>/dev/null | sed -n 's/.*\.\(sm_[0-9a-z]*\)\..*/\1/p' | sort -u | tr '\n' ' '; }
elf=$(archs --list-elf)
ptx=$(archs --list-ptx)
echo "$lib: machine code for ${elf:-nothing}; PTX for ${ptx:-nothing}"
bad=0
for a in sm_80 sm_86 sm_89 sm_90 sm_100 sm_120; do
  case " $elf " in *" $a "*) ;; *) echo "missing: machine code for $a" >&2; bad=1 ;; esac
done
case " $ptx " in *" sm_120 "*) ;; *) echo "missing: PTX for sm_120 (GPUs newer than the list)" >&2; bad=1 ;; esac
exit $bad
