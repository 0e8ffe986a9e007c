"""Host-preprocessing-bound training, as an image or video model's loop often is: each step
decodes JPEG frames with Pillow, resizes and normalizes them on the CPU, in the training loop
itself, then trains a ResNet on the GPU. The CPU part runs in series with the GPU part.

``--workers N`` moves the same preprocessing into N DataLoader worker processes (pinned
batches), where it overlaps the GPU; compare the two runs to check rightsize's what-if for
moving host work off the critical path. Needs Pillow (and torchvision for the ResNets;
``--model small`` is a small CNN of this file's own); on a GPU add ``--device cuda``.
"""

import argparse
import io

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


def frames(count: int, width: int, height: int) -> list[bytes]:
    """``count`` different JPEG frames (noise over a gradient), encoded once, before the loop."""
    rng = np.random.default_rng(0)
    ramp = np.linspace(0, 255, width, dtype=np.float32)[None, :, None]
    out = []
    for _ in range(count):
        pixels = np.clip(ramp + rng.normal(0, 40, (height, width, 3)), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, format="JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def preprocess(jpeg: bytes, size: int) -> torch.Tensor:
    """Decode, resize, to a normalized CHW float tensor: all on the CPU."""
    image = Image.open(io.BytesIO(jpeg)).convert("RGB").resize((size, size), Image.BILINEAR)
    x = torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1).float().div_(255)
    return (x - MEAN) / STD


class Frames(Dataset):
    def __init__(self, jpegs: list[bytes], length: int, size: int) -> None:
        self.jpegs, self.length, self.size = jpegs, length, size

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return preprocess(self.jpegs[index % len(self.jpegs)], self.size), index % 10


def make_model(name: str) -> torch.nn.Module:
    if name == "small":  # four strided convolutions, for a CPU run in seconds
        layers: list[torch.nn.Module] = []
        for c_in, c_out in ((3, 16), (16, 32), (32, 64), (64, 64)):
            layers += [torch.nn.Conv2d(c_in, c_out, 3, stride=2, padding=1),
                       torch.nn.BatchNorm2d(c_out), torch.nn.ReLU()]
        return torch.nn.Sequential(*layers, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                   torch.nn.Linear(64, 10))
    import torchvision

    return getattr(torchvision.models, name)(num_classes=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--workers", type=int, default=0,
                        help="0: preprocess in the loop; N: in N DataLoader workers")
    parser.add_argument("--frame", default="640x480", help="decoded frame size, WxH")
    parser.add_argument("--size", type=int, default=224, help="model input size")
    parser.add_argument("--model", default="resnet50", choices=["resnet18", "resnet50", "small"])
    args = parser.parse_args()
    width, height = (int(v) for v in args.frame.split("x"))
    jpegs = frames(32, width, height)
    model = make_model(args.model).to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

    def batches():
        if args.workers == 0:  # the loop decodes its own frames, in series with the GPU
            for step in range(args.steps):
                first = step * args.batch
                xs = [preprocess(jpegs[(first + i) % len(jpegs)], args.size)
                      for i in range(args.batch)]
                yield torch.stack(xs), torch.arange(first, first + args.batch) % 10
        else:
            data = Frames(jpegs, args.steps * args.batch, args.size)
            yield from DataLoader(data, batch_size=args.batch, num_workers=args.workers,
                                  pin_memory=args.device != "cpu", prefetch_factor=4)

    steps = 0
    for x, y in batches():
        x, y = x.to(args.device, non_blocking=True), y.to(args.device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        steps += 1
    print(f"train_preprocess: {steps} steps, {args.workers} workers, loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
