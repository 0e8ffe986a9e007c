"""What ships: the sdist is a source tree whose tests run, the wheel has the package data.

``python -m build`` makes the sdist, then the wheel from that sdist (as pip does from an sdist),
so a file the sdist forgets is missing from the wheel too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile

import pytest

from tests.conftest import REPO, USER_HOME

# What the tests read besides the package and themselves, and what runs them.
SDIST_NEEDS = ("samples/runs/train_dataloader-cpu/manifest.json", "samples/configs/gpt2.json",
               "docs/json-contract.md", "benchmarks/projection_accuracy.py",
               "benchmarks/fit_comm.py",
               "tests/conftest.py", "LICENSE", "README.md", "dev", ".ci/run", "hatch_build.py",
               "rightsize/traces/_kscan.c")
WHEEL_NEEDS = ("rightsize/py.typed", "rightsize/catalog/data/gpus.csv",
               "rightsize/catalog/data/prices.csv", "rightsize/catalog/data/rates.json",
               "rightsize/catalog/data/mig_profiles.csv", "rightsize/catalog/data/aliases.csv",
               "rightsize/catalog/data/links.csv", "rightsize/catalog/data/systems.csv",
               "rightsize/catalog/data/comm_model.json",
               "rightsize/catalog/data/serving_rates.json",
               "rightsize/catalog/data/gfd_products.csv",
               "rightsize/analyzers/diagnosis/data/recommendations.json",
               "rightsize/analyzers/diagnosis/data/kernel_taxonomy.csv",
               "rightsize/analyzers/diagnosis/data/fused_attention.json",
               "rightsize/reports/templates/report.html.j2",
               "rightsize/reports/templates/serving_plan.html.j2",
               "rightsize/reports/templates/serving_plan.js",
               "rightsize/reports/static/chart.umd.min.js",
               "rightsize/serve/templates/base.html.j2")


@pytest.mark.slow  # two builds: about 5 s on the 2-core VM
def test_sdist_is_complete_and_its_wheel_has_the_package_data(tmp_path):
    pytest.importorskip("build", reason="the test extra's `build` is not installed")
    try:
        import hatchling  # noqa: F401

        isolation = ["--no-isolation"]  # offline and fast when the backend is at hand
    except ImportError:
        isolation = []
    # an isolated build installs the backend from the user's package sources (their pip.conf)
    env = dict(os.environ, HOME=USER_HOME) if not isolation and USER_HOME else None
    res = subprocess.run([sys.executable, "-m", "build", *isolation, "--outdir", str(tmp_path),
                          str(REPO)], check=False, capture_output=True, text=True, timeout=300,
                         env=env)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    [sdist] = tmp_path.glob("rightsize-*.tar.gz")
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1]: m for m in tar.getmembers() if "/" in m.name}
    missing = [p for p in SDIST_NEEDS if p not in members]
    assert missing == []
    assert members["dev"].mode & 0o111, "dev lost its executable bit"
    assert not [p for p in members if "__pycache__" in p or p.endswith((".so", ".pyc"))]
    [wheel] = tmp_path.glob("rightsize-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert [p for p in WHEEL_NEEDS if p not in names] == []
    assert not [p for p in names if p.startswith(("tests/", "samples/", "docs/"))]
