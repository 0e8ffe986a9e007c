"""Memory-bound training: large elementwise ops and reductions over big tensors, few FLOPs.

CPU default finishes in seconds; on a GPU use e.g. ``--device cuda --scale 256``.
"""

import argparse

import torch


class Elementwise(torch.nn.Module):
    """Scale, shift, GELU, normalise: every op reads and writes the whole tensor once."""

    def __init__(self, numel: int) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(numel))
        self.shift = torch.nn.Parameter(torch.zeros(numel))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.gelu(x * self.scale + self.shift)
        return x - x.mean() / (x.std() + 1e-5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--scale", type=int, default=1, help="multiplies the tensor size")
    args = parser.parse_args()
    numel = (1 << 18) * args.scale  # 1 MiB of fp32 per tensor at scale 1
    model = torch.nn.Sequential(*[Elementwise(numel) for _ in range(4)]).to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(numel, device=args.device)
    for _ in range(args.steps):
        optimizer.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
    print(f"train_memory: {args.steps} steps, loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
