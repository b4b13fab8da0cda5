"""Progress bars: on in a plain terminal, off under CI or TQDM_DISABLE, off for quick steps."""

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

from ifir_lib.core.progress import progress, progress_enabled


@pytest.fixture
def terminal_env(monkeypatch):
    for var in ("CI", "TQDM_DISABLE"):
        monkeypatch.delenv(var, raising=False)


def test_enabled_unless_ci_or_tqdm_disable(terminal_env, monkeypatch):
    assert progress_enabled()
    for var, value, on in [
        ("CI", "true", False),
        ("CI", "1", False),
        ("CI", "0", True),
        ("CI", "false", True),
    ]:
        monkeypatch.setenv(var, value)
        assert progress_enabled() is on, (var, value)
    monkeypatch.delenv("CI")
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert not progress_enabled()


def test_bar_on_stderr_without_ci(terminal_env, capsys):
    assert list(progress(range(3), desc="encode", delay=0)) == [0, 1, 2]
    err = capsys.readouterr().err
    assert "encode: 100%" in err and "3/3" in err


def test_no_bar_under_ci(terminal_env, monkeypatch, capsys):
    monkeypatch.setenv("CI", "1")
    assert list(progress(range(3), desc="encode", delay=0)) == [0, 1, 2]
    assert capsys.readouterr().err == ""


def test_caller_can_turn_it_off_and_quick_steps_print_nothing(terminal_env, capsys):
    list(progress(range(3), desc="a", delay=0, disable=True))
    list(progress(range(3), desc="b"))  # done before the 2 s delay
    assert capsys.readouterr().err == ""


def _in_terminal(env: dict) -> str:
    """What a plain terminal shows for a 3-step bar (a real pseudo-terminal, not a pipe)."""
    code = (
        "from ifir_lib.core.progress import progress\nfor _ in progress(range(3), desc='mine', delay=0): pass"
    )
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=follower, stdout=follower, stderr=follower, env=env
    )
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    return out.decode(errors="replace")


def test_a_real_terminal_shows_the_bar_and_ci_hides_it():
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "TQDM_DISABLE")}
    shown = _in_terminal(env)
    assert "mine: 100%" in shown and "3/3" in shown
    assert _in_terminal({**env, "CI": "true"}) == ""
