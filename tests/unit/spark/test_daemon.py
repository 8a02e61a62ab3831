"""statectl.spark.daemon: a Spark job's driver and Python workers import the installed pyspark, compiled,
instead of compiling the copy in the zip spark-submit puts first on their path; a rescale's workers are forked
by statectl's daemon unless the user names one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark

from statectl.spark.launch import rescale_conf

ROOT = Path(__file__).resolve().parents[3]
LIB = Path(pyspark.__file__).parent / "python" / "lib"


def _imported(prefer: bool) -> str:
    """Where ``import pyspark`` finds it with the zips first on PYTHONPATH, as spark-submit sets it."""
    zips = [str(LIB / "pyspark.zip"), *map(str, LIB.glob("py4j-*-src.zip"))]
    code = ("from statectl.spark.daemon import prefer_installed_pyspark\n"
            + ("prefer_installed_pyspark()\n" if prefer else "")
            + "import pyspark, py4j\nprint(pyspark.__file__)\nprint(py4j.__file__)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*zips, str(ROOT)]))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_the_installed_pyspark_comes_before_its_zip():
    assert f"{LIB / 'pyspark.zip'}" in _imported(prefer=False)  # what spark-submit's path gives
    got = _imported(prefer=True).splitlines()
    assert got[0] == pyspark.__file__ and ".zip" not in got[1], got


def test_a_rescales_workers_come_from_statectls_daemon_unless_the_user_names_one():
    conf = rescale_conf({"spark.driver.extraJavaOptions": "-Xmx2g"})
    assert conf["spark.python.daemon.module"] == "statectl.spark.daemon"
    assert conf["spark.driver.extraJavaOptions"].endswith("-Xmx2g")
    assert rescale_conf({"spark.python.daemon.module": "mine"})["spark.python.daemon.module"] == "mine"


def test_the_installed_py4j_version_is_read_beside_pyspark(tmp_path: Path):
    """Read from the site dir's py4j/version.py (importlib.metadata scans every distribution at each start)."""
    import py4j.version

    from statectl.spark.daemon import _installed_py4j

    assert _installed_py4j(str(Path(pyspark.__file__).parents[1])) == py4j.version.__version__
    assert _installed_py4j(str(tmp_path)) is None
    (tmp_path / "py4j").mkdir()
    (tmp_path / "py4j" / "version.py").write_text('__version__ = "0.10.9.1"\n')
    assert _installed_py4j(str(tmp_path)) == "0.10.9.1"
