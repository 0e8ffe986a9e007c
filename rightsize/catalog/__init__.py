"""The GPU catalog: specs with sources, dated prices, name aliases, and user overrides.

Package data in ``data/`` (see its README); loaded with :func:`load_catalog`. The catalog sits
beside the analyzers (sizing and the roofline read it) and the CLI (``rightsize gpus``); it
imports nothing of rightsize but errors, the shared vocabulary and the node classes (node.py).
"""

from rightsize.catalog.catalog import (
    GIB,
    NO_BF16_ARCHITECTURES,
    Alias,
    Catalog,
    CatalogError,
    CatalogFile,
    DeviceMatch,
    Gpu,
    Price,
    load_catalog,
    parse_catalog_text,
)
from rightsize.vocab import Precision

__all__ = [
    "GIB", "NO_BF16_ARCHITECTURES", "Alias", "Catalog", "CatalogError", "CatalogFile",
    "DeviceMatch", "Gpu", "Precision", "Price", "load_catalog", "parse_catalog_text",
]
