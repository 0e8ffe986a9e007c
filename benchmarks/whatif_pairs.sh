#!/usr/bin/env bash
# Record, on a machine with an NVIDIA GPU, the pairs of sample runs that check rightsize's
# what-ifs against measurements: each "before" run gets advice with a predicted step, and its
# "after" run applies that advice (benchmarks/whatif_check.py compares the two).
#
#   benchmarks/whatif_pairs.sh OUTDIR [TAG]      (TAG: the GPU, e.g. h100)
#
# OUTDIR/<name>-<TAG>/   one `rightsize run` directory per run; OUTDIR/log.txt everything printed
set -u
out=${1:?usage: benchmarks/whatif_pairs.sh OUTDIR [TAG]}
tag=${2:-gpu}
py=${PYTHON:-python3}
mkdir -p "$out"
exec > >(tee -a "$out/log.txt") 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$py -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'

record() {  # record NAME [RUN OPTIONS] SCRIPT ARGS...
    local name=$1
    shift
    echo "== rightsize run $name: $*"
    local t0=$SECONDS
    timeout 150 $py -m rightsize run --no-color --no-report --out "$out/$name-$tag" "$@"
    echo "-- $name: exit $? in $((SECONDS - t0)) s"
}

# host preprocessing in the loop -> in DataLoader workers (rule host-cpu-work)
record preprocess samples/train_preprocess.py --device cuda
record preprocess_stack --with-stack samples/train_preprocess.py --device cuda
record preprocess_workers8 samples/train_preprocess.py --device cuda --workers 8
# data-loader wait -> enough workers (rule dataloader-stall)
record dataloader samples/train_dataloader.py --device cuda
record dataloader_workers16 samples/train_dataloader.py --device cuda --workers 16
# fp32 GEMMs -> TF32 / bf16 autocast (rule fp32-without-tensor-cores)
record compute_fp32 samples/train_compute.py --device cuda --scale 8
record compute_tf32 samples/train_compute.py --device cuda --scale 8 --precision tf32
record compute_bf16 samples/train_compute.py --device cuda --scale 8 --precision bf16
# pageable -> pinned copies (rule pageable-copies), at three batch sizes
for s in 4 16 64; do
    record pcie_s$s samples/train_pcie.py --device cuda --scale $s
    record pcie_pinned_s$s samples/train_pcie.py --device cuda --scale $s --pin
done
du -sh "$out"/*
