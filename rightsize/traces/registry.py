"""The registry of readers: the one list the loader detects formats with.

Role: :data:`READERS` in detection order; :data:`SUPPORTED`, the formats as the loader's
"supported:" error line names them. Inputs: the readers' own objects (``<module>.READER``,
:class:`rightsize.traces.readers.Reader`). Adding a reader is one entry here (docs/formats.md).

Detection order matters because the detect tests overlap on odd files: exact magic first (SQLite,
which is then an nsys export or refused), then the text formats by their headers (ncu's
``"ID",...,"Kernel Name"`` line, then nvidia-smi/DCGM headers, then nccl-tests' ``# nThread``
or result-table lines), and Kineto -- any JSON object
or array -- last. nsys is :class:`~rightsize.traces.readers.Deferred`: sqlite3 and its readers
are imported for SQLite files only.
"""

from __future__ import annotations

from rightsize.traces import kineto, metrics_logs, nccl_tests, ncu
from rightsize.traces.readers import Deferred, Reader

NSYS = Deferred(name="nsys", described="Nsight Systems SQLite (nsys export --type sqlite)",
                module="rightsize.traces.nsys", magic=b"SQLite format 3\x00")

READERS: tuple[Reader, ...] = (NSYS, ncu.READER, metrics_logs.READER, nccl_tests.READER,
                               kineto.READER)

# The line names the format most inputs are in first, then the others in detection order.
SUPPORTED = ", ".join([
    kineto.READER.described,
    *(r.described for r in READERS if r is not kineto.READER),
    "a directory of traces",
    "or a run directory",
])
