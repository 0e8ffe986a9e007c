"""PCIe-bound training: each step builds a large batch in pageable host memory and copies it to
the device, then does little work with it.

On CPU there is no PCIe link (the copy is a host memcpy); on a GPU run ``--device cuda --scale 16``
to see pageable host-to-device copies dominate. ``--pin`` pins the host buffers for comparison.
"""

import argparse

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--scale", type=int, default=1, help="multiplies the batch size")
    parser.add_argument("--pin", action="store_true", help="use pinned host memory")
    args = parser.parse_args()
    batch, width = 256 * args.scale, 4096
    model = torch.nn.Linear(width, 16).to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for _ in range(args.steps):
        host = torch.randn(batch, width)  # fresh pageable memory every step
        if args.pin:
            host = host.pin_memory()
        x = host.to(args.device, non_blocking=args.pin)
        if args.device == "cpu":
            x = x.clone()  # stands in for the copy a GPU would need
        optimizer.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
    print(f"train_pcie: {args.steps} steps, loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
