"""MIG (Multi-Instance GPU) profiles: catalog data for ``rightsize plan``'s partitions.

``data/mig_profiles.csv`` lists every profile of each MIG-capable catalog GPU (A100 40/80GB,
H100 80GB and NVL 94GB, H200 141GB, B200, GB200; the ``+me`` media-extension variants too), each
row with its source (data/README.md): compute slices (of 7), memory slices (of 8), the memory in
the profile's name, and how many instances of it one GPU holds. Loaded with
``importlib.resources``.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from functools import cache
from importlib import resources

COMPUTE_SLICES = 7  # GPCs a MIG-capable GPU is divided into (A100/H100/H200)
MEMORY_SLICES = 8


@dataclass(frozen=True, slots=True)
class MigProfile:
    gpu: str
    profile: str  # e.g. "1g.10gb"
    compute_slices: int
    memory_slices: int
    memory_gb: float  # decimal GB as in the profile name (below the real GiB: conservative)
    max_instances: int
    source: str

    @property
    def compute_fraction(self) -> float:
        return self.compute_slices / COMPUTE_SLICES

    @property
    def memory_fraction(self) -> float:
        """Memory and its bandwidth are split together: memory slices of 8."""
        return self.memory_slices / MEMORY_SLICES

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gb * 1e9)

    @property
    def media_extensions(self) -> bool:
        """A ``+me`` profile: its base profile plus the decoders/JPEG/OFA, one per GPU."""
        return self.profile.endswith("+me")

    @property
    def resource(self) -> str:
        """The Kubernetes extended resource (NVIDIA device plugin, ``mixed`` MIG strategy)."""
        return f"nvidia.com/mig-{self.profile}"


@cache
def mig_profiles() -> tuple[MigProfile, ...]:
    text = (resources.files("rightsize.catalog") / "data" / "mig_profiles.csv").read_text("utf-8")
    return tuple(MigProfile(r["gpu"], r["profile"], int(r["compute_slices"]),
                            int(r["memory_slices"]), float(r["memory_gb"]),
                            int(r["max_instances"]), r["source"])
                 for r in csv.DictReader(io.StringIO(text)))


def profiles_for(gpu: str, media_extensions: bool = False) -> tuple[MigProfile, ...]:
    """``gpu``'s profiles, smallest first (memory, then compute); empty without MIG.

    The ``+me`` variants are left out unless asked for: same compute and memory as their base
    profile but one per GPU, so a slice for a job that needs no video decoder is the base."""
    rows = [p for p in mig_profiles() if p.gpu.lower() == gpu.lower()
            and (media_extensions or not p.media_extensions)]
    return tuple(sorted(rows, key=lambda p: (p.memory_slices, p.compute_slices)))
