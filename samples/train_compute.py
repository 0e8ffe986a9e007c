"""Compute-bound training: large matmuls (an MLP) and a convolution, nothing else in the way.

CPU default finishes in seconds; on a GPU use e.g. ``--device cuda --scale 8``. ``--precision``
tf32 allows TF32 matrix math, bf16 runs the step under bf16 autocast: the measurements that check
rightsize's what-if for its fp32-off-tensor-cores advice.

Under ``torchrun --nproc-per-node N`` it trains data-parallel (DDP; gloo on the CPU, NCCL on a
GPU), so each rank's trace says which rank of which job it is.
"""

import argparse
import contextlib
import os

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--scale", type=int, default=1, help="multiplies width and batch")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16"])
    args = parser.parse_args()
    if args.precision == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:  # launched by torchrun: one rank of a data-parallel job
        torch.distributed.init_process_group("nccl" if args.device == "cuda" else "gloo")
        if args.device == "cuda":
            args.device = f"cuda:{os.environ['LOCAL_RANK']}"
            torch.cuda.set_device(args.device)
    width, batch = 512 * args.scale, 64 * args.scale
    model = torch.nn.Sequential(
        torch.nn.Unflatten(1, (1, 16, width // 16)),
        torch.nn.Conv2d(1, 8, 3, padding=1),
        torch.nn.Flatten(),
        torch.nn.Linear(8 * width, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, 10),
    ).to(args.device)
    if distributed:
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(batch, width, device=args.device)
    y = torch.randint(0, 10, (batch,), device=args.device)
    for _ in range(args.steps):
        optimizer.zero_grad(set_to_none=True)
        amp = torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16) \
            if args.precision == "bf16" else contextlib.nullcontext()
        with amp:
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    print(f"train_compute: {args.steps} steps, loss {loss.item():.4f}")
    if distributed:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
