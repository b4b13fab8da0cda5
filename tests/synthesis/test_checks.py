"""Parsing LLM answers and checking reversals (pure)."""

import pytest

from ifir_lib.synthesis import checks as rc
from ifir_lib.testing.inputs import make_seed


@pytest.mark.parametrize(
    "raw, status, reversal, reason",
    [
        (
            "Think.\n<answer><new_instruction>Only UK sources.</new_instruction></answer>",
            "accepted",
            "Only UK sources.",
            None,
        ),
        (
            '<answer> <new_instruction>\n "Only UK sources."\n</new_instruction> </answer>',
            "accepted",
            "Only UK sources.",
            None,
        ),
        ("No lever exists.\n<answer>None</answer>", "declined", None, None),
        ("<answer> none. </answer>", "declined", None, None),
        ("<answer><new_instruction>None</new_instruction></answer>", "declined", None, None),
        ("I would write: focus on Spain.", "rejected", None, "missing <answer> tag"),
        ("<answer><new_instruction>Focus on Spain.", "rejected", None, "garbled tags: <answer> not closed"),
        ("<answer>Focus on Spain.</answer>", "rejected", None, "garbled tags: no <new_instruction>"),
        ("<answer><new_instruction>   </new_instruction></answer>", "rejected", None, "empty instruction"),
        # the reasoning may quote the format; the last answer block is the answer
        (
            "Format is <answer>None</answer> or an instruction.\n<answer><new_instruction>Use Kenyan data.</new_instruction></answer>",
            "accepted",
            "Use Kenyan data.",
            None,
        ),
        (None, "rejected", None, "missing <answer> tag"),
    ],
)
def test_parse_answer(raw, status, reversal, reason):
    p = rc.parse_answer(raw)
    assert (p.status, p.reversal) == (status, reversal)
    assert (p.reason is None) if reason is None else p.reason.startswith(reason)


def test_parse_answer_keeps_reasoning_separately():
    p = rc.parse_answer(
        "Step 1: profile.\nStep 2: levers.\n<answer><new_instruction>Use Kenyan data.</new_instruction></answer>"
    )
    assert p.reasoning == "Step 1: profile.\nStep 2: levers."
    assert "Step" not in p.reversal


SEED = make_seed(0)  # instruction "Only consider studies conducted in Germany."


@pytest.mark.parametrize(
    "text, why",
    [
        ("Only include the positive passage.", "meta-task language"),
        ("Return the first passage and skip the others.", "meta-task language"),
        ("Prefer the instruction negatives over everything else.", "meta-task language"),
        ("Find the document above and skip the rest.", "meta-task language"),
        ("Return N* but not P+.", "meta-task language"),
        ("Keep negative documents about reefs.", "meta-task language"),
        ("Unlike the original instruction, use work from Spain.", "meta-task language"),
        ("Only keep neg-0000-0 and similar reports.", "names passage id"),
        ("Only consider studies conducted in Germany.", "near-copy"),
        ("Only consider the studies conducted in Germany!", "near-copy"),
        ("Use Spain. Skip Germany. Skip Chile. Skip Japan. Skip Kenya.", "too long: 5 sentences"),
    ],
)
def test_check_reversal_rejects(text, why):
    assert rc.check_reversal(text, SEED).startswith(why)


@pytest.mark.parametrize(
    "text",
    [
        "Focus on field reports from Spain published in the last decade; exclude German work.",
        "Describe the passage of the 1990 act and its negative side effects.",  # 'passage of', 'negative side'
        "Use data from Spain (e.g. regional surveys). Leave out Germany.",
        # real reference reversals from the bundled seeds: a form called N12, a comet's passage
        "Explain the Ontario process, including the N12 form and the Landlord and Tenant Board.",
        "I'm after the 1910 passage, when Earth crossed the tail.",
    ],
)
def test_check_reversal_accepts(text):
    assert rc.check_reversal(text, SEED) is None


def test_count_sentences():
    assert (
        rc.count_sentences("Use UK data. Skip blogs (e.g. Medium). U.S. reports are fine! Why? Because.") == 5
    )
    assert rc.count_sentences("One sentence only") == 1
