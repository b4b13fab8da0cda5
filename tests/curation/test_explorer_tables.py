"""The explorer's pure parts: the example table, filters, word diff, scores."""

import numpy as np
import pandas as pd
import pytest

from ifir_lib.curation import tables as inspect_tables
from ifir_lib.curation import widgets as iw
from support.fakes import flip_encoder


def test_build_examples_from_seeds_alone_uses_reference_reversals(explorer_seeds):
    df = iw.build_examples(explorer_seeds)
    assert list(df["key"]) == ["s0", "s1"]  # s2 has no reference reversal
    assert set(df["backend"]) == {"reference"} and set(df["status"]) == {"accepted"}
    assert df.iloc[0]["reversal"] == "Only US sources." and df.iloc[0]["negative_id"] == "s0-n0"
    # N* is the negative the reversal targets, and the narrative forms come along for the view
    retarget = {**explorer_seeds[0], "reference_negative_index": 1, "narrative": "Relevant documents ..."}
    row = iw.build_examples([retarget]).iloc[0]
    assert row["negative_id"] == retarget["instruction_negatives"][1]["id"] and row["negative_index"] == 1
    html = inspect_tables.render_example(row.to_dict())
    assert "I as a narrative:</b> Relevant documents ..." in html


def test_build_examples_joins_rows_to_seeds(explorer_seeds, explorer_rows):
    df = iw.build_examples(explorer_seeds, explorer_rows).set_index("key")
    assert df.loc["s1#1", "negative"] == "negative one 1" and df.loc["s1#1", "status"] == "declined"
    assert df.loc["s0", "query"] == "query 0 about solar panels" and df.loc["s0", "verify_flip"] is True
    assert df.loc["s1#1", "verify_flip"] is None
    with pytest.raises(ValueError, match="names seed 'zz'"):
        iw.build_examples(explorer_seeds, [{**explorer_rows[0], "seed_id": "zz"}])
    with pytest.raises(ValueError, match="instruction negative 5"):
        iw.build_examples(explorer_seeds, [{**explorer_rows[0], "negative_index": 5}])


def test_filter_examples_each_filter(explorer_seeds, explorer_rows):
    df = iw.build_examples(explorer_seeds, explorer_rows)
    keys = lambda **kw: list(iw.filter_examples(df, **kw)["key"])  # noqa: E731
    assert keys() == ["s0", "s1#1", "s2"]
    assert keys(instruction_type="geography") == ["s0", "s2"]
    assert keys(backend="template") == ["s1#1"]
    assert keys(status="rejected") == ["s2"] and keys(status="(all)") == ["s0", "s1#1", "s2"]
    assert (
        keys(verify="passed") == ["s0"]
        and keys(verify="failed") == ["s2"]
        and keys(verify="unverified") == ["s1#1"]
    )
    assert (
        keys(search="BEFORE 2020") == []
        and keys(search="after 2020") == ["s1#1"]
        and keys(search="s2") == ["s2"]
    )
    assert keys(search="from the us") == ["s0", "s2"]  # N* passages are searched too (s1#1 shows n1)
    assert keys(decision="reject", decisions={"s2": "reject"}) == ["s2"]
    assert keys(decision="undecided", decisions={"s2": "reject"}) == ["s0", "s1#1"]
    assert keys(instruction_type="geography", status="accepted") == ["s0"]


def test_word_diff_marks_changed_words_and_escapes():
    a, b = inspect_tables.word_diff_html("Only UK sources.", "Only US sources.")
    assert (
        a == f"Only {inspect_tables._DEL}UK</del> sources."
        and b == f"Only {inspect_tables._INS}US</ins> sources."
    )
    a, b = inspect_tables.word_diff_html("no <b> tags", "no <i> tags")
    assert "&lt;b&gt;" in a and "<b>" not in a and "&lt;i&gt;" in b


def test_view_scores_and_flip_on_known_vectors(explorer_seeds):
    s = explorer_seeds[0]
    got = iw.view_scores(
        flip_encoder(s, "Only US sources."),
        s["query"],
        s["instruction"],
        "Only US sources.",
        s["positive"]["text"],
        s["instruction_negatives"][0]["text"],
    )
    cos = 0.9 / np.hypot(0.9, 0.1)  # cos([1,0], [.9,.1])
    assert got["orig"]["pos"] == pytest.approx(cos) and got["rev"]["neg"] == pytest.approx(cos)
    assert got["orig"]["neg"] == pytest.approx(0.1 / np.hypot(0.9, 0.1)) and got["flips"] is True
    swapped = iw.view_scores(
        flip_encoder(s, "Only US sources."),
        s["query"],
        "Only US sources.",
        s["instruction"],
        s["positive"]["text"],
        s["instruction_negatives"][0]["text"],
    )
    assert swapped["flips"] is False


@pytest.mark.slow
def test_view_scores_with_minilm(minilm, explorer_seeds):
    s = explorer_seeds[0]
    got = iw.view_scores(
        minilm,
        s["query"],
        s["instruction"],
        "Only US sources.",
        s["positive"]["text"],
        s["instruction_negatives"][0]["text"],
    )
    assert all(-1 <= got[v][d] <= 1 for v in ("orig", "rev") for d in ("pos", "neg")) and isinstance(
        got["flips"], bool
    )


def test_readable_table_keeps_whole_texts_plain_numbers_and_only_the_columns_asked_for(
    explorer_seeds, explorer_rows
):
    df = inspect_tables.build_examples(explorer_seeds, explorer_rows)
    long = "word " * 60  # pandas' default display cuts a cell at 50 characters
    df.loc[0, "reversal"] = long
    html = inspect_tables.readable_table(df, ["key", "reversal"], n=1).to_html()
    assert long.strip() in html and "..." not in html
    assert "white-space: normal" in html and "max-width: 28em" in html
    assert ">key<" in html and ">reversal<" in html and ">instruction<" not in html
    assert html.count("<tr>") == 2  # the header and the one row asked for
    numbers = pd.DataFrame(
        {"cpu": [16.0, 0.337, float("nan")], "paper": [2246.0, 5.69, 305e6]}, index=["a", "b", "c"]
    )
    html = inspect_tables.readable_table(numbers).to_html()
    for shown in (">16<", ">0.34<", ">—<", ">2,246<", ">5.69<", ">305,000,000<", ">a<"):
        assert shown in html, shown
    assert "e+0" not in html


def test_render_example_scores_flip_and_a_missing_reversal(explorer_seeds, explorer_rows):
    df = inspect_tables.build_examples(explorer_seeds, explorer_rows).set_index("key", drop=False)
    scores = {"orig": {"pos": 0.8, "neg": 0.5}, "rev": {"pos": 0.6, "neg": 0.7}, "flips": True}
    card = inspect_tables.render_example(df.loc["s0"].to_dict(), scores, decision="accept", comments=["ok <"])
    assert (
        "verify_flip: <b>True</b>" in card and "Decision:</b> accept" in card and "<li>ok &lt;</li>" in card
    )
    assert "under I: " + inspect_tables._OK + " · score 0.800" in card  # P+ under I
    assert "under I': " + inspect_tables._OK + " · score 0.700" in card  # N* under I'
    assert "Model flips:</b> yes (I: P+ > N*; I': N* > P+)" in card
    declined = inspect_tables.render_example(df.loc["s1#1"].to_dict(), score_note="no model loaded")
    assert "no reversal (declined: no sound reversal)" in declined
    assert declined.count("under I': -") == 2 and "Model flips" not in declined  # no I', no labels under it
    assert "no model loaded" in declined and "verify_flip" not in declined  # a missing check is not shown
    assert "Reason:" not in declined  # the reason already explains the missing reversal
