"""launch/: every shipped launch file passes ``ifir train --dry-run --launch-config`` at its world
size, and each kind of mismatch is an error naming the file, the line and the field."""

import dataclasses
import json
from pathlib import Path

import pytest

from ifir_lib.cli import main
from ifir_lib.core.errors import ConfigError, DataError
from ifir_lib.training.launch_check import check_launch_file
from ifir_lib.training.trainer import TrainConfig

LAUNCH = Path(__file__).resolve().parents[2] / "launch"
DDP, ZERO2, DS, TORCHRUN = (
    LAUNCH / "accelerate_ddp_8gpu.yaml",
    LAUNCH / "accelerate_zero2_8gpu.yaml",
    LAUNCH / "ds_zero2.json",
    LAUNCH / "torchrun_multinode.sh",
)
PAPER = TrainConfig.preset("paper")


@pytest.fixture(autouse=True)
def _no_launch_env(monkeypatch):
    for name in ("NNODES", "NPROC_PER_NODE", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)


def line_of(path: Path, *texts: str) -> int:
    """The line holding ``texts[-1]``, found after the lines holding the texts before it."""
    lines, at = path.read_text().splitlines(), 0
    for text in texts:
        at = next(i for i in range(at, len(lines)) if text in lines[i])
    return at + 1


def test_ddp_config_matches_the_paper_preset_on_8_gpus():
    rep = check_launch_file(DDP, PAPER, 8)
    assert rep["kind"] == "accelerate" and rep["distributed_type"] == "MULTI_GPU"
    assert rep["world_size"] == 8 and rep["nodes"] == 1 and rep["warnings"] == []
    assert {"num_processes", "mixed_precision"} <= set(rep["checked"])
    assert check_launch_file(DDP, PAPER)["world_size"] == 8  # no --world-size: the file's own


def test_ddp_config_names_file_line_and_field_on_mismatch():
    with pytest.raises(ConfigError) as e:
        check_launch_file(DDP, PAPER, 4)
    n = line_of(DDP, "num_processes:")
    assert f"{DDP}:{n}: field 'num_processes': 8 processes but --world-size is 4" in str(e.value)
    with pytest.raises(
        ConfigError, match=r"field 'mixed_precision': 'bf16' but the training config has bf16=False"
    ):
        check_launch_file(DDP, PAPER.replace(bf16=False), 8)


def test_zero2_config_reads_its_deepspeed_json_and_warns_about_gradcache():
    rep = check_launch_file(ZERO2, PAPER, 8)
    assert rep["distributed_type"] == "DEEPSPEED" and rep["zero_stage"] == 2 and rep["bf16"] == "auto"
    assert any(c.endswith("ds_zero2.json:train_batch_size") for c in rep["checked"])
    assert len(rep["warnings"]) == 1 and "sentence-transformers/issues/3173" in rep["warnings"][0]
    # without GradCache mini-batches there is nothing to warn about
    plain = dataclasses.replace(PAPER, mini_batch_size=None)  # (TrainConfig.replace skips None)
    assert check_launch_file(ZERO2, plain, 8)["warnings"] == []
    with pytest.raises(ConfigError, match="num_processes"):
        check_launch_file(ZERO2, PAPER, 16)


def _ds(tmp_path, **changes) -> Path:
    doc = json.loads(DS.read_text())
    for dotted, value in changes.items():
        *parents, key = dotted.split("__")
        node = doc
        for p in parents:
            node = node.setdefault(p, {})
        node[key] = value
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


@pytest.mark.parametrize(
    "change, field, says",
    [
        ({"zero_optimization__stage": 3}, "zero_optimization.stage", "use 0, 1 or 2"),
        ({"train_micro_batch_size_per_gpu": 128}, "train_micro_batch_size_per_gpu", "batch_size is 256"),
        ({"train_batch_size": 2048}, "train_batch_size", "(256 x 4) is 1024"),
        ({"gradient_clipping": 1.0}, "gradient_clipping", "max_grad_norm is 10.0"),
        ({"gradient_accumulation_steps": 4}, "gradient_accumulation_steps", "adds no in-batch documents"),
        ({"bf16__enabled": False}, "bf16.enabled", "bf16 is True"),
        ({"fp16__enabled": True}, "fp16.enabled", "bf16 or fp32"),
        ({"optimizer__params__lr": 1e-4}, "optimizer.params.lr", "learning_rate is 3e-05"),
    ],
)
def test_deepspeed_json_mismatches_are_named(tmp_path, change, field, says):
    path = _ds(tmp_path, **change)
    with pytest.raises(ConfigError) as e:
        check_launch_file(path, PAPER, 4)
    msg, n = str(e.value), line_of(path, *('"' + k + '"' for k in field.split(".")))
    assert f"{path}:{n}: field '{field}'" in msg and says in msg


def test_deepspeed_json_alone_uses_the_given_world_size(tmp_path):
    rep = check_launch_file(DS, PAPER, 4)
    assert rep["kind"] == "deepspeed" and rep["world_size"] == 4 and rep["zero_stage"] == 2
    assert check_launch_file(_ds(tmp_path, train_batch_size=1024), PAPER, 4)["world_size"] == 4
    bad = tmp_path / "broken.json"
    bad.write_text('{\n  "bf16": {"enabled": true},\n  "zero_optimization": {"stage": 2,}\n}\n')
    with pytest.raises(DataError, match=r"broken.json:3: not valid JSON"):
        check_launch_file(bad, PAPER, 4)


def test_torchrun_script_world_size_and_flags(tmp_path, monkeypatch):
    rep = check_launch_file(TORCHRUN, PAPER, 16)  # NNODES 2 x NPROC_PER_NODE 8 by default
    assert (
        rep["kind"] == "torchrun"
        and rep["world_size"] == 16
        and rep["nodes"] == 2
        and rep["preset"] == "paper"
    )
    with pytest.raises(ConfigError) as e:
        check_launch_file(TORCHRUN, PAPER, 8)
    n = line_of(TORCHRUN, "set -euo", "torchrun")
    assert f"{TORCHRUN}:{n}: field '--nnodes x --nproc-per-node': 16 processes but --world-size is 8" in str(
        e.value
    )
    monkeypatch.setenv("NNODES", "4")  # the environment overrides the script's default, as in bash
    assert check_launch_file(TORCHRUN, PAPER)["world_size"] == 32
    # a script that hard-codes another batch size or preset trains something else than was checked
    script = tmp_path / "run.sh"
    script.write_text(TORCHRUN.read_text().replace("--preset paper", "--preset paper --batch-size 128"))
    with pytest.raises(ConfigError, match=r"field 'batch_size': the script trains with 128 .* checks 256"):
        check_launch_file(script, PAPER, 32)
    script.write_text(TORCHRUN.read_text().replace("--preset paper", "--preset cpu"))
    with pytest.raises(ConfigError, match=r"field 'bf16': the script trains with False"):
        check_launch_file(script, PAPER, 32)
    script.write_text(
        TORCHRUN.read_text().replace("NPROC_PER_NODE=${NPROC_PER_NODE:-8}", "NPROC_PER_NODE=${GPUS:?}")
    )
    with pytest.raises(ConfigError, match=r"field '--nproc-per-node': None; needs a fixed number"):
        check_launch_file(script, PAPER, 32)


def test_torchrun_script_flags_beyond_the_batch_and_length_are_checked(tmp_path, monkeypatch):
    """Only seven flags were read and ten fields compared: a script training rng seed 3, a WSD
    schedule, views shuffled apart and plain MNRL passed the dry run of the paper preset. The
    words after ``train`` are expanded as torchrun's options are: a script passing ``--data
    "$DATA" --out "$OUT"`` was refused (the words were dropped, and ``--data`` lost its value)."""
    script = tmp_path / "run.sh"
    for name in ("DATA", "OUT", "SEED", "STEPS"):
        monkeypatch.delenv(name, raising=False)

    def check(flags: str, pre: str = ""):
        text = TORCHRUN.read_text().replace("set -euo pipefail\n", "set -euo pipefail\n" + pre)
        script.write_text(text.replace("--preset paper", f"--preset paper {flags}"))
        return check_launch_file(script, PAPER, 16)

    pre = "DATA=${DATA:-/data/seeds.jsonl}\nOUT=${OUT:?set OUT}\n"
    assert check('--data "$DATA" --out "$OUT"', pre)["warnings"] == []
    with pytest.raises(ConfigError, match=r"field 'rng_seed': the script trains with 3"):
        check('--rng-seed "$SEED"', "SEED=${SEED:-3}\n")
    said = check('--rng-seed "$SEED" --save-steps=$STEPS', "SEED=${SEED:?set SEED}\n")
    assert [w.split("field ")[1] for w in said["warnings"]] == [
        "'rng_seed': not checkable: the script's --rng-seed is a shell variable not resolved here",
        "'save_steps': not checkable: the script's --save-steps=$STEPS is a shell variable not resolved here",
    ]
    assert "rng_seed" not in said["checked"] and "batch_size" in said["checked"]

    n = line_of(TORCHRUN, "set -euo", "ifir_lib train")
    with pytest.raises(ConfigError) as e:
        check("--rng-seed 3 --lr-schedule wsd --no-co-batch")
    for field, says in (("rng_seed", "3"), ("lr_schedule", "'wsd'"), ("co_batch_views", "False")):
        assert f"{script}:{n}: field '{field}': the script trains with {says}" in str(e.value)
    with pytest.raises(ConfigError, match=r"field 'in_batch_negatives': the script trains with True"):
        check("--loss mnrl")
    with pytest.raises(ConfigError, match=r"field 'learning_rate': the script trains with 0.0001"):
        check("--learning 1e-4")  # an abbreviation, as `ifir train` reads it
    with pytest.raises(ConfigError, match=r"field 'train': `ifir train` refuses .*--bogus"):
        check("--bogus 1")
    assert check("--rng-seed 0 --mode ins-dv")["preset"] == "paper"  # what the dry run checks


def test_the_launch_check_reads_every_ifir_train_option_as_ifir_train_does():
    """The check parses the script's flags with a parser of its own (training may not import the
    CLI): it must know each option of ``ifir train``, with the same type, or a new one goes unread."""
    from ifir_lib.cli import build_parser
    from ifir_lib.training.flags import TRAIN_CONFIG_FLAGS
    from ifir_lib.training.launch_check import _train_parser

    # the options that make the config: their defaults count too (the others' are not read)
    config = {"--preset", "--mode", "--loss", "--base-model", "--rng-seed", "--no-co-batch"}
    config.update("--" + f.replace("_", "-") for f, _ in TRAIN_CONFIG_FLAGS)

    def options(parser):
        return {
            o: (a.type, a.nargs, a.const, a.dest, a.choices and list(a.choices), o in config and a.default)
            for a in parser._actions
            for o in a.option_strings
            if o != "-h"
        }

    train = next(a for a in build_parser()._actions if a.choices and "train" in a.choices).choices["train"]
    assert options(_train_parser()) == {o: v for o, v in options(train).items() if o != "--help"}


def _dry_run(world_size: int) -> list[str]:
    """``ifir train --dry-run`` of the paper preset against the DDP launch file."""
    return ["train", "--dry-run", "--preset", "paper", "--world-size", str(world_size)] + [
        "--launch-config",
        str(DDP),
        "--out",
        "unused",
    ]


def test_cli_dry_run_checks_the_launch_file(capsys):
    assert main(_dry_run(8)) == 0
    est = json.loads(capsys.readouterr().out)
    assert est["world_size"] == 8 and est["effective_batch"] == 8 * 256 and est["launch"]["file"] == str(DDP)
    assert main(_dry_run(4)) == 2
    assert f"{DDP}:" in capsys.readouterr().err
    assert main(["train", "--launch-config", str(DDP), "--out", "unused"]) == 2
    assert "read by --dry-run only" in capsys.readouterr().err


def test_torchrun_script_hands_every_train_flag_to_ifir(monkeypatch):
    """torchrun's own parser reads the shipped script's command: with '--' after '-m', a flag that
    abbreviates one of torchrun's (here '--run', of '--run-path') reaches ``ifir train`` untouched."""
    import re
    import shlex

    from torch.distributed.run import get_args_parser

    monkeypatch.setenv("NODE_RANK", "0")
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.1")
    lines = re.sub(r"\\\n", " ", TORCHRUN.read_text()).splitlines()
    command = next(ln for ln in lines if ln.startswith("torchrun "))
    words = [w for w in shlex.split(command.replace('"$@"', "--out R --run x"))[1:] if "$" not in w]
    args = get_args_parser().parse_args(words)
    assert (args.module, args.training_script) == (True, "ifir_lib")
    assert args.training_script_args == ["train", "--preset", "paper", "--out", "R", "--run", "x"]
