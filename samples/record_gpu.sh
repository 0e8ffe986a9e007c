#!/usr/bin/env bash
# Record the GPU sample runs (samples/runs/<script>-<gpu>/) and real exports of the GPU tools on a
# machine with an NVIDIA GPU, PyTorch and rightsize importable.
#
#   samples/record_gpu.sh OUTDIR [TAG]
#
# OUTDIR/runs/<script>-<TAG>/   one `rightsize run` directory per sample script (TAG: h100 ...)
# OUTDIR/exports/               nvidia-smi --query-gpu CSV logged during the runs, ncu --csv pages
#                               of train_compute and train_memory, nvidia-smi -q, the tool versions
# OUTDIR/log.txt                everything printed
#
# Each run is small (10 steps, 3 traced); the scales are the ones the scripts' docstrings give.
set -u
out=${1:?usage: samples/record_gpu.sh OUTDIR [TAG]}
tag=${2:-gpu}
py=${PYTHON:-python3}
mkdir -p "$out/runs" "$out/exports"
exec > >(tee -a "$out/log.txt") 2>&1

echo "== versions"
nvidia-smi -q > "$out/exports/nvidia-smi-q.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max \
    --format=csv
$py -c 'import torch, pynvml; print("torch", torch.__version__, "cuda", torch.version.cuda,
torch.cuda.get_device_name(0)); print("nvidia-ml-py", pynvml.__version__ if hasattr(pynvml,
"__version__") else "?")'
ncu --version 2>&1 | tail -1
$py - <<'EOF2'
import pynvml as n
n.nvmlInit()
h = n.nvmlDeviceGetHandleByIndex(0)
try:
    print("GPM supported:", n.nvmlGpmQueryDeviceSupport(h).isSupportedDevice)
except Exception as e:  # noqa: BLE001 - a probe: print what NVML says
    print("GPM query failed:", type(e).__name__, e)
EOF2

echo "== nvidia-smi log (100 ms) during the runs"
nvidia-smi --query-gpu=timestamp,index,name,utilization.gpu,utilization.memory,memory.used,\
memory.total,power.draw,clocks.sm,clocks.mem,temperature.gpu,pcie.link.gen.current,\
pcie.link.width.current --format=csv -lms 100 > "$out/exports/nvidia-smi-query-gpu.csv" &
smi=$!

record() {  # record NAME [RUN OPTIONS] SCRIPT ARGS...
    local name=$1
    shift
    echo "== rightsize run $name: $*"
    local t0=$SECONDS
    timeout 180 $py -m rightsize run --no-color --out "$out/runs/$name-$tag" "$@"
    echo "-- $name: exit $? in $((SECONDS - t0)) s"
}

record train_compute samples/train_compute.py --device cuda --scale 8
record train_memory samples/train_memory.py --device cuda --scale 256
# 30 traced steps at 20 ms sampling: NVML/GPM samples inside the trace window (3 steps of 18 ms
# fall between two 100 ms samples)
record train_memory_long --active 30 --sample-interval-s 0.02 samples/train_memory.py \
    --device cuda --scale 256 --steps 40
record train_pcie samples/train_pcie.py --device cuda --scale 16
record train_pcie_pinned samples/train_pcie.py --device cuda --scale 16 --pin
record train_dataloader samples/train_dataloader.py --device cuda
record train_host samples/train_host.py --device cuda
record train_cnn samples/train_cnn.py --device cuda --scale 4
record infer samples/infer.py --device cuda --scale 8 --seconds 10
record train_preprocess --with-stack samples/train_preprocess.py --device cuda
kill $smi

echo "== ncu --csv (speed of light, occupancy, roofline) of the first 40 kernels"
sections="--section SpeedOfLight --section Occupancy --section LaunchStats \
--section SpeedOfLight_RooflineChart"
# shellcheck disable=SC2086
timeout 150 ncu --csv --clock-control none $sections -c 40 $py samples/train_compute.py --device cuda \
    --scale 8 --steps 2 > "$out/exports/ncu-train_compute.csv" 2> "$out/exports/ncu.err"
echo "-- ncu train_compute: exit $?, $(wc -l < "$out/exports/ncu-train_compute.csv") lines"
# shellcheck disable=SC2086
timeout 150 ncu --csv --page raw --clock-control none $sections -c 40 $py samples/train_memory.py \
    --device cuda --scale 256 --steps 2 > "$out/exports/ncu-raw-train_memory.csv" \
    2>> "$out/exports/ncu.err"
echo "-- ncu raw train_memory: exit $?, $(wc -l < "$out/exports/ncu-raw-train_memory.csv") lines"
du -sh "$out"/runs/* "$out"/exports/*
