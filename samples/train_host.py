"""Host-bound training: many tiny ops per step (a deep stack of 8-wide layers, batch 4), so the
time goes to Python and kernel launches, not to the math.

On a GPU run ``--device cuda``; ``--scale`` multiplies the depth.
"""

import argparse

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--scale", type=int, default=1, help="multiplies the depth")
    args = parser.parse_args()
    layers = []
    for _ in range(48 * args.scale):
        layers += [torch.nn.Linear(8, 8), torch.nn.Tanh()]
    model = torch.nn.Sequential(*layers).to(args.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)  # foreach Adam: more tiny ops
    x = torch.randn(4, 8, device=args.device)
    for _ in range(args.steps):
        optimizer.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
    print(f"train_host: {args.steps} steps, loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
