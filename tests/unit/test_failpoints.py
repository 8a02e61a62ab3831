"""statectl.failpoints: the spec, each action, counts and sequences, in-process configuration; that every
point in the code is documented; and a kill in a real subprocess."""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from statectl import failpoints
from statectl.errors import StatectlError, UsageError
from statectl.failpoints import FailpointError
from tests.tools.standby_helpers import process_state

PACKAGE = Path(failpoints.__file__).parent


@pytest.fixture(autouse=True)
def _isolated():
    failpoints.configure("")
    yield
    failpoints.configure(None)


def outcomes(name: str, n: int) -> list[str]:
    """What each of ``n`` hits of ``name`` did: "ok", "raise" or an errno name."""
    out = []
    for _ in range(n):
        try:
            failpoints.hit(name)
            out.append("ok")
        except FailpointError:
            out.append("raise")
        except OSError as e:
            out.append(errno.errorcode[e.errno])
    return out


def test_an_unconfigured_point_does_nothing():
    failpoints.hit("nowhere")
    with failpoints.active("somewhere=raise"):
        failpoints.hit("nowhere")


def test_raise_is_a_statectl_error_naming_the_point():
    with failpoints.active("p=raise"), pytest.raises(FailpointError) as e:
        failpoints.hit("p")
    assert isinstance(e.value, StatectlError) and e.value.exit_code == 1
    assert str(e.value) == "failpoint p: injected failure"


@pytest.mark.parametrize("name", ["ENOSPC", "EIO", "EDQUOT", "EACCES"])
def test_raise_errno_is_an_os_error_with_that_errno(name):
    with failpoints.active(f"p=raise:{name}"), pytest.raises(OSError) as e:
        failpoints.hit("p")
    assert e.value.errno == getattr(errno, name)
    assert "failpoint p" in str(e.value)


def test_sleep_pauses_then_goes_on(monkeypatch):
    slept = []
    monkeypatch.setattr(failpoints.time, "sleep", slept.append)  # the clock is not under test
    with failpoints.active("p=sleep:0.25,q=sleep:3"):
        failpoints.hit("p")
        failpoints.hit("q")
        failpoints.hit("p")
    assert slept == [0.25, 3.0, 0.25]


def test_counts_and_sequences():
    with failpoints.active("a=2*off->raise:ENOSPC, b=1*raise, c=off, d=1*off->2*raise->off->raise") as fp:
        assert outcomes("a", 4) == ["ok", "ok", "ENOSPC", "ENOSPC"]  # a full disk stays full
        assert outcomes("b", 3) == ["raise", "ok", "ok"]  # used up: the point does nothing
        assert outcomes("c", 2) == ["ok", "ok"]
        assert outcomes("d", 6) == ["ok", "raise", "raise", "ok", "ok", "ok"]  # an uncounted term never ends
    assert (fp.hits("a"), fp.hits("b"), fp.hits("c"), fp.hits("d")) == (4, 3, 2, 6)


def test_counts_hold_across_threads():
    with failpoints.active("p=500*off->raise") as fp:
        results: list[str] = []
        threads = [threading.Thread(target=lambda: results.extend(outcomes("p", 100))) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert fp.hits("p") == 800
    assert results.count("ok") == 500 and results.count("raise") == 300


def test_active_restores_what_was_there_even_on_error():
    failpoints.configure("p=raise")
    with pytest.raises(RuntimeError), failpoints.active("p=off"):
        failpoints.hit("p")
        raise RuntimeError("the block failed")
    with pytest.raises(FailpointError):
        failpoints.hit("p")
    with failpoints.active(""):
        failpoints.hit("p")


def test_configure_none_reads_the_environment_again(monkeypatch):
    monkeypatch.setenv(failpoints.ENV, "p=raise:EIO")
    failpoints.configure(None)
    assert outcomes("p", 1) == ["EIO"]
    monkeypatch.setenv(failpoints.ENV, "")
    assert outcomes("p", 1) == ["EIO"]  # read once: later changes are not seen
    failpoints.configure(None)
    assert outcomes("p", 1) == ["ok"]


def test_a_bare_name_means_kill():
    points = failpoints.parse(" a , b=kill,c= ")
    assert {name: p.terms for name, p in points.items()} == {"a": [(None, "kill")], "b": [(None, "kill")],
                                                              "c": [(None, "kill")]}


@pytest.mark.parametrize("spec", ["p=explode", "p=raise:ENOTANERRNO", "p=raise:", "p=sleep", "p=sleep:x",
                                  "p=0*raise", "p=2*", "p=raise->", "p=-1*raise", "p=raise:enospc"])
def test_a_bad_spec_is_a_usage_error_and_changes_nothing(spec):
    failpoints.configure("q=raise")
    with pytest.raises(UsageError, match="STATECTL_FAILPOINTS"):
        failpoints.configure(spec)
    with pytest.raises(UsageError), failpoints.active(spec):
        pass
    assert outcomes("q", 1) == ["raise"]


def test_every_point_in_the_code_is_documented():
    used = set()
    for path in PACKAGE.rglob("*.py"):
        used |= set(re.findall(r'failpoints\.hit\("([^"]+)"\)', path.read_text()))
    documented = set(re.findall(r"``([a-z]+(?:-[a-z]+)+)``", failpoints.__doc__ or ""))
    assert used and used == documented, (sorted(used - documented), sorted(documented - used))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("spec, code", [("p=kill", -signal.SIGKILL), ("p=1*off->kill", -signal.SIGKILL),
                                        ("p=2*off->kill", 0), ("p=raise", 1), ("", 0)])
def test_a_subprocess_reads_the_environment(spec, code):
    script = ("from statectl import failpoints\n"
              "try:\n    failpoints.hit('p'); failpoints.hit('p')\n"
              "except failpoints.FailpointError:\n    raise SystemExit(1)\n")
    p = subprocess.run([sys.executable, "-c", script], check=False, env={failpoints.ENV: spec, "PATH": ""},
                       cwd=PACKAGE.parent, capture_output=True, timeout=50)
    assert p.returncode == code, p.stderr


@pytest.mark.timeout(60)
def test_stop_holds_the_process_until_it_is_continued():
    """``stop`` holds the process at the point (stopped, not ended) until SIGCONT; then it goes on, and a
    used-up ``1*stop`` lets the next hit pass."""
    script = "from statectl import failpoints\nfailpoints.hit('p'); failpoints.hit('p')\nprint('went on')\n"
    p = subprocess.Popen([sys.executable, "-c", script], env={failpoints.ENV: "p=1*stop", "PATH": ""},
                         cwd=PACKAGE.parent, stdout=subprocess.PIPE, text=True)
    try:
        while p.poll() is None and process_state(p.pid) != "T":
            threading.Event().wait(0.01)
        assert p.poll() is None and process_state(p.pid) == "T"
        os.kill(p.pid, signal.SIGCONT)
        out, _ = p.communicate(timeout=50)
    finally:
        p.kill()
    assert p.returncode == 0 and out == "went on\n"
