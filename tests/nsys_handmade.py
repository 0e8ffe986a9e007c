"""A tiny hand-made nsys export (SQLite) with exact, known contents, for the nsys tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def make_export(
    path: Path, *, new_gpu_table: bool = True, enums: bool = True, user: bytes = b"ren\xe9"
) -> Path:
    """A tiny nsys-like export: 2 kernels, 2 memcpys, 1 memset, 3 API calls, NVTX steps."""
    conn = sqlite3.connect(path)
    ex = conn.execute
    ex("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    conn.executemany(
        "INSERT INTO StringIds VALUES (?, ?)",
        [
            (1, "void at::native::foo_kernel<(int)4, at::native::F<float>>(int)"),
            (2, "foo_kernel"),
            (3, "cudaLaunchKernel_v7000"),
            (4, "cuLaunchKernelEx"),
            (5, "cudaMemcpyAsync_v3020"),
            (6, "train_step"),
        ],
    )
    ex("CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT)")
    ex(
        "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.1.2'), "
        "('EXPORT_USER', CAST(? AS TEXT))",
        (user,),
    )
    ex(
        "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_VERSION', CAST(? AS TEXT))",
        (b"2023.1 \xff",),
    )
    ex("CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER)")
    ex("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1000000000000)")
    if new_gpu_table:
        ex(
            "CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT, totalMemory INTEGER, "
            "smCount INTEGER, computeMajor INTEGER, computeMinor INTEGER, maxWarpsPerSm INTEGER, "
            "threadsPerWarp INTEGER)"
        )
        ex(
            "INSERT INTO TARGET_INFO_GPU VALUES (0, 'Test GPU', 1000, 10, 8, 6, 48, 32), "
            "(1, 'iGPU', 0, 0, 0, 0, 0, 0)"
        )
    else:  # 2021 layout
        ex("CREATE TABLE TARGET_INFO_GPU (vmId INTEGER, deviceId INTEGER, name TEXT)")
        ex("INSERT INTO TARGET_INFO_GPU VALUES (1, 0, 'Test GPU')")
        ex(
            "CREATE TABLE TARGET_INFO_CUDA_GPU (name TEXT, globalMemorySize INTEGER, "
            "numMultiprocessors INTEGER, computeCapabilityMajor INTEGER, "
            "computeCapabilityMinor INTEGER, maxWarpsPerMultiprocessor INTEGER, "
            "numThreadsPerWarp INTEGER, deviceId INTEGER, pid INTEGER)"
        )
        ex(
            "INSERT INTO TARGET_INFO_CUDA_GPU VALUES ('Test GPU', 1000, 10, 8, 6, 48, 32, 0, 1), "
            "('Test GPU', 1000, 10, 8, 6, 48, 32, 0, 2)"
        )
    ex(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, "
        "streamId INTEGER, correlationId INTEGER, demangledName INTEGER, shortName INTEGER, "
        "gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, blockY INTEGER, "
        "blockZ INTEGER, registersPerThread INTEGER, staticSharedMemory INTEGER, "
        "dynamicSharedMemory INTEGER)"
    )
    ex(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES "
        "(100, 150, 0, 7, 11, 1, 2, 5, 2, 1, 64, 2, 1, 32, 1024, 2048), "
        "(300, 330, 0, 7, 12, 1, 2, 20, 1, 1, 256, 1, 1, 40, 0, 0)"
    )
    ex(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER, end INTEGER, deviceId INTEGER, "
        "streamId INTEGER, correlationId INTEGER, bytes INTEGER, copyKind INTEGER, "
        "srcKind INTEGER, dstKind INTEGER)"
    )
    ex(
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (50, 90, 0, 7, 13, 4000, 1, 0, 2), "
        "(200, 210, 0, 7, 14, 100, 2, 2, 1)"
    )
    ex(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER, end INTEGER, deviceId INTEGER, "
        "streamId INTEGER, correlationId INTEGER, value INTEGER, bytes INTEGER, memKind INTEGER)"
    )
    ex("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (400, 404, 0, 7, 15, 0, 64, 2)")
    ex(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, eventClass INTEGER, "
        "globalTid INTEGER, correlationId INTEGER, nameId INTEGER)"
    )
    gtid = (4242 << 24) | 4243
    ex(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (90, 95, 0, ?, 11, 3), "
        "(290, 299, 1, ?, 12, 4), (40, 45, 0, ?, 13, 5)",
        (gtid, gtid, gtid),
    )
    ex(
        "CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, text TEXT, "
        "globalTid INTEGER, textId INTEGER)"
    )
    ex(
        "INSERT INTO NVTX_EVENTS VALUES (0, 250, 59, 'ProfilerStep#7', ?, NULL), "
        "(250, 500, 59, 'ProfilerStep#8', ?, NULL), (10, 20, 59, NULL, ?, 6), "
        "(30, NULL, 34, 'a mark', ?, NULL), (300, 340, 59, 'train_step', ?, NULL)",
        (gtid,) * 5,
    )
    if enums:
        ex("CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER, name TEXT, label TEXT)")
        ex(
            "INSERT INTO ENUM_CUDA_MEM_KIND VALUES (0, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', "
            "'Pageable'), (1, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', 'Pinned'), "
            "(2, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', 'Device')"
        )
        ex("CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER, name TEXT, label TEXT)")
        ex(
            "INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (1, 'CUDA_MEMCPY_KIND_HTOD', 'HtoD'), "
            "(2, 'CUDA_MEMCPY_KIND_DTOH', 'DtoH')"
        )
    conn.commit()
    conn.close()
    return path
