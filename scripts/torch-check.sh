#!/usr/bin/env bash
# PyTorch on tutti, on a host with 2+ NVIDIA GPUs and a Python whose PyTorch
# uses NCCL (pip wheels): builds tutti with its device executor, then, under
# torchrun --nproc_per_node 2, runs with NVIDIA's NCCL and with tutti and
# compares:
#   1. every c10d collective (tests/torch/c10d_check.py), results identical;
#   2. DDP training of torchvision's resnet18 (tests/torch/ddp_compare.py),
#      ROUNDS runs of each library alternated, parameters compared and the
#      steps per second of each run printed; tutti is loaded once through
#      LD_PRELOAD and once installed as the environment's libnccl.so.2
#      (scripts/torch-use-tutti.sh install, then restore);
#   3. a rank killed mid-training surfaces as an error (tests/torch/kill_check.py).
# Usage: scripts/torch-check.sh [PYTHON]   (ROUNDS=3 STEPS=200 OUT=dir to change)
# Exits 77 (skipped) without a GPU or without PyTorch.
set -uo pipefail
cd "$(dirname "$0")/.."
py=${1:-python3}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
ROUNDS=${ROUNDS:-3} STEPS=${STEPS:-200}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
if ! "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.device_count() >= 2 else 1)' 2>/dev/null; then
  echo "SKIPPED: needs PyTorch with 2 CUDA devices ($py)"
  exit 77
fi
BUILD_DIR=build-gpu CMAKE_ARGS="-DTUTTI_CUDA=ON ${CMAKE_ARGS:-}" bash scripts/build.sh >/dev/null || exit 1
lib=$PWD/build-gpu/libtutti.so.0
# run NAME LIB SCRIPT ARGS...: torchrun with LIB preloaded ("" for the
# environment's libnccl.so.2). Every run prints the serving library's banner
# (NCCL_DEBUG=VERSION), and a run named *tutti* must have been served by
# tutti, any other by NVIDIA's NCCL: a preload that did not take fails
# instead of comparing NCCL with itself.
run() {
  local name=$1 pre=$2
  shift 2
  echo "== $name: $*"
  env ${pre:+LD_PRELOAD=$pre} NCCL_DEBUG=VERSION "$py" -m torch.distributed.run --nproc_per_node 2 \
    --master_port $((29500 + RANDOM % 1000)) "$@" 2>&1 | grep -v "^W.*OMP_NUM_THREADS\|^\*\*\*\*" |
    tee "$out/$name.log" | grep -E "compare|ddp_compare|kill_check|Error|error"
  local rc=${PIPESTATUS[0]}
  case $name in
    *tutti*) grep -q "NCCL version .*(tutti " "$out/$name.log" ||
      { echo "FAIL: $name was not served by tutti (no tutti banner)"; rc=1; } ;;
    *) grep -q "NCCL version .*(tutti " "$out/$name.log" &&
      { echo "FAIL: $name was served by tutti, not NVIDIA's NCCL"; rc=1; } ;;
  esac
  return "$rc"
}
fail=0
run c10d_nccl "" tests/torch/c10d_check.py "$out/c10d_nccl.pt" || fail=1
run c10d_tutti "$lib" tests/torch/c10d_check.py "$out/c10d_tutti.pt" || fail=1
"$py" tests/torch/c10d_check.py --compare "$out/c10d_tutti.pt" "$out/c10d_nccl.pt" || fail=1

for ((i = 1; i <= ROUNDS; i++)); do
  run "ddp_nccl_$i" "" tests/torch/ddp_compare.py "$out/ddp_nccl_$i.pt" --steps "$STEPS" || fail=1
  if [ "$i" = 2 ]; then
    # Installed as the environment's NCCL instead of preloaded.
    bash scripts/torch-use-tutti.sh install "$py" "$lib" || fail=1
    run "ddp_tutti_$i" "" tests/torch/ddp_compare.py "$out/ddp_tutti_$i.pt" --steps "$STEPS" || fail=1
    bash scripts/torch-use-tutti.sh restore "$py" || fail=1
  else
    run "ddp_tutti_$i" "$lib" tests/torch/ddp_compare.py "$out/ddp_tutti_$i.pt" --steps "$STEPS" || fail=1
  fi
  "$py" tests/torch/ddp_compare.py --compare "$out/ddp_tutti_$i.pt" "$out/ddp_nccl_$i.pt" || fail=1
done
"$py" - "$out" "$ROUNDS" <<'EOF'
import sys, statistics, torch
out, rounds = sys.argv[1], int(sys.argv[2])
t = [torch.load(f"{out}/ddp_tutti_{i}.pt")["steps_per_s"] for i in range(1, rounds + 1)]
n = [torch.load(f"{out}/ddp_nccl_{i}.pt")["steps_per_s"] for i in range(1, rounds + 1)]
print("ddp steps/s  tutti: " + " ".join(f"{x:.1f}" for x in t) + f"  median {statistics.median(t):.1f}")
print("ddp steps/s  NCCL:  " + " ".join(f"{x:.1f}" for x in n) + f"  median {statistics.median(n):.1f}")
print(f"ddp steps/s  tutti / NCCL (medians): {statistics.median(t) / statistics.median(n):.3f}x")
EOF
TUTTI_TIMEOUT=10 run kill_tutti "$lib" tests/torch/kill_check.py || fail=1
bash scripts/torch-use-tutti.sh status "$py"
echo "torch-check: $([ $fail = 0 ] && echo PASSED || echo FAILED) (logs in $out)"
exit $fail
