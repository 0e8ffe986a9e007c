"""A small convolutional net trained on CPU: convolutions, batch norm, pooling, a linear head.

The step is convolution work (forward and backward), not framework overhead; the verdict on
its recorded run (``samples/runs/train_cnn-cpu``) checks that CPU ops' own time counts as work.
CPU default finishes in a few seconds; on a GPU use e.g. ``--device cuda --scale 4``.
"""

import argparse

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--scale", type=int, default=1, help="multiplies batch and channels")
    args = parser.parse_args()
    c, batch = 16 * args.scale, 16 * args.scale
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, c, 3, padding=1), torch.nn.BatchNorm2d(c), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(c, 2 * c, 3, padding=1), torch.nn.BatchNorm2d(2 * c), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(2 * c, 4 * c, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4 * c, 10),
    ).to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    x = torch.randn(batch, 3, 64, 64, device=args.device)
    y = torch.randint(0, 10, (batch,), device=args.device)
    for _ in range(args.steps):
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    print(f"train_cnn: {args.steps} steps, loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
