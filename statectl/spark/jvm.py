"""A local build's driver JVM started directly: its command line and environment exactly as pyspark's
spark-submit computes them (:func:`direct_command`). spark-submit is three bash scripts (spark-submit,
spark-class, load-spark-env.sh) and a launcher JVM of its own (``org.apache.spark.launcher.Main``) that only
prints the real JVM's command line: 0.2-0.3 s before the driver's JVM starts, on every build. This follows the
scripts and launcher of one Spark release (LAUNCHER_JAR) and only where their outcome is certain; anywhere
else (another release, a cluster master, a user's spark-env.sh, spark-defaults.conf or java-opts, SPARK_HOME or
another variable the launcher reads, a conf key it treats apart, quoting in the JVM options) it gives None and
spark-submit runs. tests/unit/spark/test_jvm.py holds it to the real launcher's output."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

# The release whose scripts (bin/) and launcher (org.apache.spark.launcher) this follows.
LAUNCHER_JAR = "spark-launcher_2.13-4.3.0.jar"
SUBMIT_CLASS = "org.apache.spark.deploy.SparkSubmit"
# JavaModuleOptions.DEFAULT_MODULE_OPTIONS of that release, then SparkSubmitCommandBuilder's derby flag.
_MODULE_OPTIONS = (
    "-XX:+IgnoreUnrecognizedVMOptions", "--add-modules=jdk.incubator.vector",
    *(f"--add-opens={m}=ALL-UNNAMED" for m in (
        "java.base/java.lang", "java.base/java.lang.invoke", "java.base/java.lang.reflect", "java.base/java.io",
        "java.base/java.net", "java.base/java.nio", "java.base/java.util", "java.base/java.util.concurrent",
        "java.base/java.util.concurrent.atomic", "java.base/jdk.internal.ref", "java.base/sun.nio.ch",
        "java.base/sun.nio.cs", "java.base/sun.security.action", "java.base/sun.util.calendar",
        "java.security.jgss/sun.security.krb5")),
    "-Dio.netty.tryReflectionSetAccessible=true", "-Dio.netty.allocator.type=pooled",
    "-Dio.netty.handler.ssl.defaultEndpointVerificationAlgorithm=NONE", "--sun-misc-unsafe-memory-access=allow",
    "--enable-native-access=ALL-UNNAMED", "-Dderby.connection.requireAuthentication=false")
# Variables the scripts or the launcher read and this does not follow (present at all: spark-submit runs).
_UNFOLLOWED_ENV = ("SPARK_HOME", "SPARK_CONF_DIR", "SPARK_ENV_LOADED", "SPARK_PREPEND_CLASSES", "SPARK_TESTING",
                   "SPARK_SQL_TESTING", "SPARK_SUBMIT_OPTS", "SPARK_LAUNCHER_OPTS", "SPARK_REMOTE",
                   "SPARK_CONNECT_MODE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_API_MODE", "SPARK_SCALA_SHELL",
                   "SPARK_CONNECT_BEELINE", "SPARK_PRINT_LAUNCH_COMMAND")
# Conf keys the launcher reads for the driver's JVM, or that make it another kind of launch.
_UNFOLLOWED_CONF = ("spark.driver.extraclasspath", "spark.driver.defaultextraclasspath",
                    "spark.driver.defaultjavaoptions", "spark.driver.extralibrarypath", "spark.master",
                    "spark.submit.deploymode", "spark.remote", "spark.api.mode")
_CONF_FILES = ("spark-env.sh", "spark-defaults.conf", "java-opts")
_MEMORY, _JAVA_OPTS = "spark.driver.memory", "spark.driver.extraJavaOptions"


def direct_command(submit: Path, master: str, name: str, conf: dict[str, str], app: list[str],
                   env: Mapping[str, str], cwd: Path) -> tuple[list[str], dict[str, str]] | None:
    """The driver JVM's command line and environment that ``submit --master master --name name --conf k=v...
    app...`` would exec, started with ``env`` in ``cwd``, its stdin not a pipe and no controlling terminal (as
    launch._start runs it), but for the --conf options' order: the launcher writes them in its map's order,
    this in ``conf``'s (SparkSubmit puts them in a map again: distinct keys, so their order means nothing);
    None where that is not certain (see the module doc)."""
    home = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(submit)), ".."))  # find-spark-home's
    jars, conf_dir = os.path.join(home, "jars"), os.path.join(home, "conf")
    if not master.startswith("local") or any(k in env for k in _UNFOLLOWED_ENV) \
            or not os.path.isfile(os.path.join(jars, LAUNCHER_JAR)) \
            or os.path.exists(os.path.join(home, "bin", "find_spark_home.py")) \
            or any(os.path.exists(os.path.join(conf_dir, f)) for f in _CONF_FILES):
        return None
    java, options = _java(env), _java_options(conf)
    if java is None or options is None or not conf.get(_MEMORY):
        return None
    classpath = [_cp_entry(conf_dir), *(os.path.join(jars, f) for f in os.listdir(jars) if f.startswith("slf4j-api-")),
                 os.path.join(jars, "*")]
    for var in ("HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH"):
        classpath += [_cp_entry(e) for e in env.get(var, "").split(os.pathsep) if e]
    args = ["--master", master, *(a for k, v in conf.items() for a in ("--conf", f"{k}={v}")), "--name", name, *app]
    cmd = [java, "-cp", os.pathsep.join(dict.fromkeys(classpath)), f"-Xmx{conf[_MEMORY]}", *options,
           *_MODULE_OPTIONS, SUBMIT_CLASS, *args]
    # spark-submit's and load-spark-env.sh's exports (the last: no controlling terminal, stdin not a pipe), and
    # the PWD bash sets
    extra = {"PWD": os.path.realpath(cwd), "SPARK_HOME": home, "PYTHONHASHSEED": "0", "SPARK_ENV_LOADED": "1",
             "SPARK_CONF_DIR": conf_dir, "SPARK_SCALA_VERSION": "2.13",
             "SPARK_BEELINE_OPTS": env.get("SPARK_BEELINE_OPTS", "") + " -Djline.terminal=jline.UnsupportedTerminal"}
    return cmd, {**env, **extra}


def _java(env: Mapping[str, str]) -> str | None:
    """The java the launcher names: $JAVA_HOME/bin/java, else the launcher JVM's own java.home (the java on
    PATH that spark-class runs it with: the JDK its libjvm.so is in); None when it is not there to run, or is
    found relative to the current dir."""
    if env.get("JAVA_HOME"):
        java = f"{env['JAVA_HOME']}/bin/java"
        return java if os.path.isabs(java) and os.access(java, os.X_OK) else None
    if not all(os.path.isabs(d) for d in env.get("PATH", "").split(os.pathsep)):
        return None  # bash looks in a relative dir from the build's dir, not this process's
    found = shutil.which("java", path=env.get("PATH"))
    if found is None:
        return None
    libjvm = Path(os.path.realpath(found)).parent.parent / "lib" / "server" / "libjvm.so"
    if not libjvm.is_file():
        return None
    return str(Path(os.path.realpath(libjvm)).parents[2] / "bin" / "java")


def _java_options(conf: dict[str, str]) -> list[str] | None:
    """spark.driver.extraJavaOptions as the launcher splits it, where that is a split at whitespace (ASCII, no
    quote or backslash); None otherwise, or when they set a heap size (the launcher refuses that) or ``conf``
    holds a key the launcher reads apart."""
    if any("=" in k or k.lower() in _UNFOLLOWED_CONF for k in conf):
        return None
    opts = conf.get(_JAVA_OPTS, "")
    if not opts.isascii() or any(c in opts for c in "'\"\\") or "Xmx" in opts:
        return None
    return opts.split()


def _cp_entry(entry: str) -> str:
    """A classpath entry as the launcher writes it: a directory with a trailing slash."""
    return entry + "/" if os.path.isdir(entry) and not entry.endswith("/") else entry
