"""The audit loads numpy's BLAS with one thread unless the user set a thread count, and leaves the environment as
it found it: checked in fresh interpreters (real subprocesses), with threadpoolctl reading what the loaded BLAS
library says of itself.

Reads and writes nothing but the subprocesses' output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = """
import json, os
from mle_world.cli.results import one_blas_thread
before = dict(os.environ)
with one_blas_thread():
    inside = {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    import numpy
restored = dict(os.environ) == before
from threadpoolctl import threadpool_info  # (it sets KMP_DUPLICATE_LIB_OK)
blas = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
print(json.dumps({"inside": inside, "blas": blas, "restored": restored}))
"""


def probe(**env: str) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_numpy_first_imported_in_the_audit_has_one_blas_thread_and_the_environment_is_restored() -> None:
    got = probe()
    assert got["inside"] == {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    assert got["blas"] == [1] and got["restored"] is True


def test_a_users_thread_count_stands() -> None:
    got = probe(OPENBLAS_NUM_THREADS="2")
    assert got["inside"] == {"OPENBLAS_NUM_THREADS": "2", "MKL_NUM_THREADS": "1"}
    assert got["restored"] is True
