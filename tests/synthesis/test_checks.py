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
        # declines in words (the prompt asks for exactly "None"; models paraphrase it)
        (
            "<answer><new_instruction>No sound reversal exists.</new_instruction></answer>",
            "declined",
            None,
            None,
        ),
        ("<answer>None - no objective attribute separates them.</answer>", "declined", None, None),
        ("<answer><new_instruction>N/A</new_instruction></answer>", "declined", None, None),
        (
            "<answer><new_instruction>Na+ channels in neurons only.</new_instruction></answer>",
            "accepted",
            "Na+ channels in neurons only.",
            None,
        ),
        (
            "<answer><new_instruction>None of the pricing notes; dosage advice only.</new_instruction></answer>",
            "accepted",
            "None of the pricing notes; dosage advice only.",
            None,
        ),
        (
            "<answer><new_instruction>Only Spain.</new_instruction><new_instruction>Only Chile.</new_instruction></answer>",
            "rejected",
            None,
            "2 <new_instruction> blocks",
        ),
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
        (".", "no content"),  # what '...' and 'N/A'-like answers trained as before
        ("Spain!", "no content"),
        ("{{ new_instruction }}", "template syntax"),
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


LONG = make_seed(1)
LONG["instruction_negatives"][0]["text"] = (
    "Migraine prevention is offered to adults with headaches on four or more days a month. First-line "
    "options include the beta-blocker propranolol, the anticonvulsant topiramate and the antidepressant "
    "amitriptyline, each started at a low dose and raised slowly."
)


@pytest.mark.parametrize(
    "text, target, why",
    [
        # a sentence of N* as the instruction: the reversed view is solved by word matching
        (
            "Relevant: first-line options include the beta-blocker propranolol, the anticonvulsant topiramate "
            "and the antidepressant amitriptyline.",
            None,
            "copies 12 consecutive words of instruction negative 'neg-0001-0'",
        ),
        ("Only preventive drugs such as the beta-blocker propranolol, at a low dose.", 0, "abstract style"),
    ],
)
def test_a_reversal_copied_from_a_passage_is_rejected(text, target, why):
    assert rc.check_reversal(text, LONG, target=target).startswith(why)
    if target is not None:  # the same text is fine for the reference style
        assert rc.check_reversal(text, LONG) is None


@pytest.mark.parametrize(
    "text",
    [
        "None other than peer-reviewed trials count.",
        "None, except trials run in children.",
        "N/A values must be reported, not imputed.",
        "Exclude opioids.",
        "Adults only.",
        "仅限成人研究。",  # no spaces: CJK characters count as words
    ],
)
def test_short_or_none_opening_instructions_are_not_declines_or_empty(text):
    answer = f"<answer><new_instruction>{text}</new_instruction></answer>"
    assert rc.parse_answer(answer).status == "accepted" and rc.check_reversal(text, SEED) is None
    assert rc.unusable(text) is None


def test_the_bundled_reversals_pass_the_checks(bundled_seeds):
    """The reviewed reversals (reference, abstract against its N*) pass every check: the limits
    (``COPY_SPAN``, ``MIN_WORDS``, the decline phrases) reject none of them."""
    for s in bundled_seeds:
        j = s["reference_negative_index"]
        assert rc.check_reversal(s["reference_reversal"], s) is None, s["id"]
        if s.get("abstract_reversal"):
            assert rc.check_reversal(s["abstract_reversal"], s, target=j) is None, s["id"]
        answer = f"<answer><new_instruction>{s['reference_reversal']}</new_instruction></answer>"
        assert rc.parse_answer(answer).status == "accepted"
