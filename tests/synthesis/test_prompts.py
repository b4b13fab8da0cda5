"""The Appendix A prompt: structure and rendering."""

from ifir_lib.synthesis import prompts
from ifir_lib.testing.inputs import make_seed


def test_prompt_has_appendix_a_structure():
    s = make_seed(2, negatives=3)
    t = prompts.load_template("reversal_prompt.j2")
    text = prompts.render_prompt(s, 1, t)
    heads = [
        "# 1. Goal",
        "# 2. Inputs",
        "# 3. Output format",
        "# 4. Definitions",
        "# 5. Method",
        "# 6. Guardrails",
        "# 7. Checklist",
    ]
    assert [text.index(h) for h in heads] == sorted(text.index(h) for h in heads)
    assert "<answer><new_instruction>" in text and "<answer>None</answer>" in text
    data = [
        s["query"],
        s["instruction"],
        s["positive"]["text"],
        s["instruction_negatives"][1]["text"],
        "1. " + s["instruction_negatives"][0]["text"],
        "2. " + s["instruction_negatives"][2]["text"],
    ]
    pos = [text.rindex(d) for d in data]
    assert pos == sorted(pos)  # query, I, P+, N*, then the remaining negatives numbered
    assert "neg-" not in text and "pos-" not in text  # ids never reach the model
    assert "(none)" in prompts.render_prompt(make_seed(3, negatives=1), 0, t)
    assert t.name == "reversal_prompt" and t.version == "1.0" and len(t.sha) == 8
    assert t.full_version == f"1.0+{t.sha}"


def test_abstract_style_keeps_the_structure_and_adds_the_reading_rule():
    s = make_seed(2, negatives=3)
    ref = prompts.load_template(prompts.STYLE_TEMPLATES["reference"])
    abstract = prompts.load_template(prompts.STYLE_TEMPLATES["abstract"])
    a, r = prompts.render_prompt(s, 1, abstract), prompts.render_prompt(s, 1, ref)
    heads = ["# 1. Goal", "# 5. Method", "# 6. Guardrails", "# 7. Checklist"]
    assert [a.index(h) for h in heads] == sorted(a.index(h) for h in heads)
    assert abstract.name != ref.name and abstract.sha != ref.sha
    rule = "Make it a reading task, not a matching task."
    assert rule in a and rule not in r
    assert a.rindex(s["instruction_negatives"][1]["text"]) > a.rindex(s["positive"]["text"])


def test_cli_style_refuses_a_conflicting_template(tmp_path, capsys):
    from ifir_lib import cli

    out = tmp_path / "r.jsonl"
    args = ["synthesize", "--backend", "template", "--out", str(out), "--limit", "1", "--style", "abstract"]
    assert cli.main([*args, "--template", "reversal_prompt.j2"]) == 2
    assert (
        "--style abstract and --template reversal_prompt.j2 name different prompts" in capsys.readouterr().err
    )
    assert not out.exists()
