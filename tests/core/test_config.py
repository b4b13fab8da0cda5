"""The environment and the command line's plumbing: flags read from the environment, the commit a
run records, paths given with ``~`` or commas, an alias that is also a folder."""

import argparse
import os

import pytest

from ifir_lib import cli
from ifir_lib.core import config as C
from ifir_lib.core.errors import ConfigError
from ifir_lib.core.models import resolve_model


@pytest.mark.parametrize(
    "value, on",
    [
        ("false", False),
        ("False", False),
        ("no", False),
        ("OFF", False),
        ("0", False),
        ("", False),
        ("1", True),
        ("true", True),
    ],
)
def test_environment_flags_read_false_as_off(monkeypatch, value, on):
    """``IFIR_SMOKE=false`` and ``CI=False`` turned smoke mode on (24 seeds, a temporary folder)."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("IFIR_SMOKE", value)
    assert C.smoke_mode() is on
    monkeypatch.delenv("IFIR_SMOKE")
    monkeypatch.setenv("CI", value)
    assert C.smoke_mode() is on


def test_an_empty_cache_variable_is_unset_and_home_is_expanded(monkeypatch):
    monkeypatch.setenv("IFIR_CACHE", "")  # put every cache in the folder a command ran in
    assert C.cache_dir() == C.Path.home() / ".cache" / "ifir"
    monkeypatch.setenv("IFIR_CACHE", "~/ifir-cache")
    assert C.cache_dir() == C.Path.home() / "ifir-cache"


def test_an_installed_copy_records_its_version_not_the_current_folder_s_commit(monkeypatch):
    """Outside a checkout, the folder a command ran in (the user's own repository) gave its HEAD."""
    monkeypatch.setattr(C, "IN_CHECKOUT", False)
    said = C.git_commit()
    assert said.startswith("ifir-lib ") and "(installed, code " in said and len(said.split("code ")[1]) == 9


def test_an_alias_that_is_also_a_folder_here_is_refused(tmp_path, monkeypatch):
    """A run trained into ./minilm was scored as the packaged MiniLM under the run's labels."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "minilm").mkdir()
    assert resolve_model("minilm") != "minilm"  # an empty folder (a refused --out left it): the alias
    (tmp_path / "minilm" / "modules.json").write_text("[]")
    with pytest.raises(ConfigError, match="'minilm' is both a packaged model and a folder here"):
        resolve_model("minilm")
    assert resolve_model("./minilm") == "./minilm"


def test_home_and_comma_in_path_arguments(tmp_path, monkeypatch):
    """``--out=~/x`` (no shell expansion) wrote into a folder named '~'; a folder named 'a,b' given
    to a list flag was cut into two items."""
    args = cli._expand_home(argparse.Namespace(out="~/x", followir=["~/s"], rng_seed=3))
    assert args.out == os.path.expanduser("~/x") and args.followir == [os.path.expanduser("~/s")]
    home = os.path.expanduser("~")
    args = cli._expand_home(
        argparse.Namespace(
            audit=["negative=~/a.jsonl"], eval="v1,~/set,~", base_url="http://h/?q=~/x", k="a~b"
        )
    )
    assert args.audit == [f"negative={home}/a.jsonl"] and args.eval == f"v1,{home}/set,{home}"
    assert args.base_url == "http://h/?q=~/x" and args.k == "a~b"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "robust,v2").mkdir()
    with pytest.raises(ConfigError, match="holding a comma"):
        cli._names("robust,v2")
    assert cli._names("v1,v2") == ("v1", "v2")
    evaluate = cli.build_parser().parse_args(["evaluate", "--model", "m"])
    assert evaluate.bootstrap_rng_seed is None  # the run's rng_seed, as the Python API draws it


def test_an_old_preset_name_says_which_preset_it_is(capsys):
    """``--preset default`` is ``cpu``'s old name: in smoke mode it gave budget 1,056, not smoke's 16, unsaid."""
    from ifir_lib.core.config import check_preset

    assert check_preset("default", "experiment") == "cpu"
    assert "experiment preset: cpu ('default' is its old name" in capsys.readouterr().err
    assert check_preset("smoke", "experiment") == "smoke" and capsys.readouterr().err == ""


def test_a_list_flag_drops_the_spaces_around_its_items():
    """``--eval "v1, v2"`` planned the mteb task ' v2' and failed at --collect, after every run had trained."""
    assert cli._names("v1, v2") == ("v1", "v2") and cli._names(" 0 , 1", int) == (0, 1)
