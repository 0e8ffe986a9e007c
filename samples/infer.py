"""Inference without an optimizer: a small MLP classifier in ``torch.inference_mode`` for
``--seconds`` of wall time, so ``rightsize run`` uses its time-based window.

On a GPU run ``--device cuda --scale 8 --seconds 10``: with CUDA the profiler's first start
(CUPTI) takes seconds, and a 4 s job ends before the 2 s window has recorded two calls.
"""

import argparse
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--scale", type=int, default=1, help="multiplies width and batch")
    args = parser.parse_args()
    width, batch = 256 * args.scale, 32 * args.scale
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.Linear(width, 10)
    )
    model = model.to(args.device).eval()
    x = torch.randn(batch, width, device=args.device)
    calls = 0
    end_s = time.monotonic() + args.seconds
    with torch.inference_mode():
        while time.monotonic() < end_s:
            model(x).argmax(dim=1)
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            time.sleep(0.005)  # requests arrive one at a time
            calls += 1
    print(f"infer: {calls} calls in {args.seconds} s")


if __name__ == "__main__":
    main()
