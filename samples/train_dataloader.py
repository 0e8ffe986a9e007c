"""Data-loader-bound training: a Dataset whose ``__getitem__`` is slow (decoding stand-in),
loaded with ``num_workers=0`` by default, and a small model.

``--workers N`` uses N DataLoader worker processes; on a GPU add ``--device cuda``.
"""

import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowDataset(Dataset):
    """Each item costs ``delay_s`` of host time, like decoding an image."""

    def __init__(self, size: int, width: int, delay_s: float) -> None:
        self.size, self.width, self.delay_s = size, width, delay_s

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        time.sleep(self.delay_s)
        g = torch.Generator().manual_seed(index)
        return torch.randn(self.width, generator=g), index % 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--delay-ms", type=float, default=2.0, help="cost of one item")
    args = parser.parse_args()
    width = 256
    data = SlowDataset(args.steps * args.batch, width, args.delay_ms / 1000)
    loader = DataLoader(data, batch_size=args.batch, num_workers=args.workers)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)
    )
    model = model.to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    steps = 0
    for x, y in loader:
        x, y = x.to(args.device), y.to(args.device)
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        steps += 1
    print(f"train_dataloader: {steps} steps, {args.workers} workers, loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
