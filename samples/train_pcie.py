"""PCIe-bound training: each step copies a large batch from pageable host memory to the device,
then does little work with it. The batches are made once, before the loop: making a random batch
on the host every step costs more than its copy, and the run would be host-bound instead (what
``rightsize run`` said of this script's first version on an H100: 90% of the step in
``torch.randn`` on the CPU, 7% in the copy).

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
    pool = [torch.randn(batch, width) for _ in range(2)]  # pageable, as a Dataset returns them
    if args.pin:
        pool = [host.pin_memory() for host in pool]
    for step in range(args.steps):
        x = pool[step % len(pool)].to(args.device, non_blocking=args.pin)
        if args.device == "cpu":
            x = x.clone()  # stands in for the copy a GPU would need
        optimizer.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
    print(f"train_pcie: {args.steps} steps, loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
