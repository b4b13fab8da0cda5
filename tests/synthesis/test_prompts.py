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
