"""statectl.spark.jvm: a local build's driver JVM started directly has the command line and environment that
the installed pyspark's spark-submit (its scripts, then its launcher JVM) gives it, for the confs the builds
pass; anywhere that is not certain, spark-submit runs. The launcher JVM runs here (about 0.5 s); the driver's
JVM never starts (a stand-in java records what it was given)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from statectl.spark import jvm
from statectl.spark.launch import ClassArchive, launch_command, rescale_conf, spark_command, worker_conf
from statectl.spark.probe import java_binary, spark_submit_path


OPTS = "spark.driver.extraJavaOptions"
IGNORED = ("SHLVL", "_")  # bash's own bookkeeping: nothing in Spark or its Python workers reads them


def _env(**extra: str) -> dict[str, str]:
    """This process's environment without what makes spark-submit's outcome uncertain, as a build's would be."""
    env = {k: v for k, v in os.environ.items() if k not in jvm._UNFOLLOWED_ENV and k != "JAVA_HOME"}
    return {**env, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, **extra}


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory) -> Path:
    """A JAVA_HOME whose bin/java runs the real java for spark-class's launcher JVM, and otherwise records its
    arguments, environment and cwd in ``seen.json`` beside it and exits."""
    home = tmp_path_factory.mktemp("jdk")
    (home / "bin").mkdir()
    real = java_binary()[0]
    java = home / "bin" / "java"
    java.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    "if 'org.apache.spark.launcher.Main' in sys.argv:\n"
                    f"    os.execv({real!r}, [{real!r}, *sys.argv[1:]])\n"
                    f"json.dump({{'argv': sys.argv, 'env': dict(os.environ), 'cwd': os.getcwd()}},"
                    f" open({str(home / 'seen.json')!r}, 'w'))\n")
    java.chmod(0o755)
    return home


def _through_spark_submit(submit: Path, conf: dict[str, str], env: dict[str, str], cwd: Path, home: Path) -> dict:
    """What spark-submit execs for the build: the stand-in java's record."""
    (home / "seen.json").unlink(missing_ok=True)
    cmd = spark_command(submit, cwd / "BUILD-JOB.json", "local[2]", conf, parent=os.getpid())
    p = subprocess.run(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       start_new_session=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads((home / "seen.json").read_text())


@pytest.mark.parametrize("kind", ["rescale", "adstore", "many-keys"])
def test_the_driver_jvm_is_what_spark_submit_execs(tmp_path: Path, stand_in: Path, kind: str):
    """The rescale's conf (light driver, workers' daemon, the class archive's flag), an adstore build's, and one
    of 20 more keys, with Hadoop's and Spark's classpath variables set: the same argv (its --conf options in any
    order), environment and cwd as through spark-submit."""
    submit = spark_submit_path()
    (tmp_path / "hadoop").mkdir()
    env = _env(JAVA_HOME=str(stand_in), HADOOP_CONF_DIR=str(tmp_path / "hadoop"),
               SPARK_DIST_CLASSPATH=f"{tmp_path / 'x.jar'}::{tmp_path / 'hadoop'}")
    conf = {"rescale": rescale_conf({OPTS: "-XX:SharedArchiveFile=/c/classes.jsa"}),
            "adstore": worker_conf({"spark.executor.memory": "2g"}),
            "many-keys": {**{f"spark.statectl.k{i}": f"v {i}" for i in range(20)}, "spark.driver.memory": "3g"}}[kind]
    seen = _through_spark_submit(submit, conf, env, tmp_path, stand_in)
    cmd, direct_env = launch_command(submit, tmp_path / "BUILD-JOB.json", "local[2]", conf, env, tmp_path,
                                     parent=os.getpid())
    assert cmd[0] == str(stand_in / "bin" / "java"), "started directly"
    assert _options(seen["argv"]) == _options(cmd)
    drop = lambda e: {k: v for k, v in e.items() if k not in IGNORED}  # noqa: E731
    assert drop(seen["env"]) == drop(direct_env)
    assert seen["cwd"] == str(tmp_path)


def test_the_java_on_path_is_named_as_the_launcher_names_it(tmp_path: Path):
    """Without JAVA_HOME, the launcher (run as spark-class runs it, with the java on PATH) names its own JDK's
    java: the same command line, read from the launcher's own output."""
    submit = spark_submit_path()
    env = _env()
    conf = rescale_conf({})
    cmd, direct_env = launch_command(submit, tmp_path / "BUILD-JOB.json", "local[2]", conf, env, tmp_path)
    assert cmd[0] != str(submit)
    home = direct_env["SPARK_HOME"]
    args = spark_command(submit, tmp_path / "BUILD-JOB.json", "local[2]", conf)[1:]
    p = subprocess.run([shutil.which("java"), "-Xmx128m", "-cp", f"{home}/jars/*", "org.apache.spark.launcher.Main",
                        jvm.SUBMIT_CLASS, *args], env=direct_env, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode()  # a NUL line, then each argument NUL-terminated (what spark-class reads)
    assert out.startswith("\0\n") and _options(out[2:].split("\0")[:-1]) == _options(cmd)


def _options(argv: list[str]) -> tuple[list[str], list[str]]:
    """``argv`` without its --conf options, and those options sorted: SparkSubmit keeps them in a map (distinct
    keys), so the launcher's order (its own map's) and the caller's are the same command."""
    confs = sorted(argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--conf")
    return [a for i, a in enumerate(argv) if a != "--conf" and (i == 0 or argv[i - 1] != "--conf")], confs


@pytest.fixture
def install(tmp_path: Path) -> Path:
    """A pyspark install's layout of the release followed (bin/spark-submit, jars/ with its launcher)."""
    (tmp_path / "pyspark" / "jars").mkdir(parents=True)
    (tmp_path / "pyspark" / "jars" / jvm.LAUNCHER_JAR).write_bytes(b"jar")
    (tmp_path / "pyspark" / "bin").mkdir()
    (tmp_path / "pyspark" / "bin" / "spark-submit").write_text("#!/bin/sh\n")
    return tmp_path / "pyspark" / "bin" / "spark-submit"


def _direct(submit: Path, master: str = "local[2]", conf: dict[str, str] | None = None, **env: str):
    conf = {"spark.driver.memory": "1g", OPTS: "-XX:+UseSerialGC", **(conf or {})}
    return jvm.direct_command(submit, master, "b", conf, ["job.py"], _env(**env), submit.parent)


def test_started_directly_only_where_certain(install: Path, tmp_path: Path, monkeypatch):
    """spark-submit runs (None) for a cluster master, another Spark release, a user's spark-env.sh,
    spark-defaults.conf or java-opts, SPARK_HOME or another variable the launcher reads, a conf key it reads
    apart, options it would split otherwise than at blanks or refuse, a JAVA_HOME without a java, a java found
    relative to the current dir (the build's is another)."""
    assert _direct(install) is not None  # the layout itself is followed
    assert _direct(install, "yarn") is None and _direct(install, "spark://h:7077") is None
    for var in ("SPARK_HOME", "SPARK_CONF_DIR", "SPARK_SUBMIT_OPTS", "SPARK_REMOTE", "SPARK_PRINT_LAUNCH_COMMAND"):
        assert _direct(install, **{var: ""}) is None, var
    for key in ("spark.driver.extraClassPath", "spark.driver.defaultJavaOptions", "spark.driver.extraLibraryPath",
                "spark.submit.deployMode", "spark.master", "spark.remote", "spark.api.mode", "a=b"):
        assert _direct(install, conf={key: "x"}) is None, key
    for opts in ('-Dx="a b"', "-Dx='a'", "-Dx=a\\ b", "-Xmx2g", "-Dx=\u00e9"):
        assert _direct(install, conf={OPTS: opts}) is None, opts
    assert _direct(install, conf={"spark.driver.memory": ""}) is None
    assert _direct(install, JAVA_HOME=str(tmp_path)) is None  # no bin/java there
    (tmp_path / "jdk" / "bin").mkdir(parents=True)
    shutil.copy(java_binary()[0], tmp_path / "jdk" / "bin" / "java")
    monkeypatch.chdir(tmp_path)  # a java that is there from here, not from the build's dir
    assert _direct(install, JAVA_HOME="jdk") is None
    assert _direct(install, PATH=f"jdk/bin:{os.environ['PATH']}") is None
    conf_dir = install.parent.parent / "conf"
    conf_dir.mkdir()
    assert _direct(install) is not None
    for name in ("spark-env.sh", "spark-defaults.conf", "java-opts"):
        (conf_dir / name).write_text("\n")
        assert _direct(install) is None, name
        (conf_dir / name).unlink()
    (install.parent.parent / "jars" / jvm.LAUNCHER_JAR).rename(install.parent.parent / "jars" / "spark-launcher.jar")
    assert _direct(install) is None, "another release's launcher"


def test_the_class_archive_flag_reaches_the_driver_jvm(tmp_path: Path, monkeypatch):
    """The archive's option (and the local driver's JIT thresholds before it) are among the JVM's own options,
    before SparkSubmit's class, where the JVM takes them."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    submit = spark_submit_path()
    archive = ClassArchive(submit, {})
    try:
        cmd, _ = launch_command(submit, tmp_path / "j.json", "local[2]", archive.conf({}), _env(), tmp_path)
    finally:
        archive.discard()
    jvm_opts = cmd[:cmd.index(jvm.SUBMIT_CLASS)]
    assert "-XX:Tier4InvocationThreshold=40000" in jvm_opts
    assert any(o.startswith(("-XX:ArchiveClassesAtExit=", "-XX:SharedArchiveFile=")) for o in jvm_opts)
