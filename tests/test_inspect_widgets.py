"""The explorer: the example table, filters, word diff, scores, and the curation file, headless."""
import json

import numpy as np
import pytest

from ifir_lib import inspect_tables
from ifir_lib import inspect_widgets as iw
from ifir_lib.curation import load_decisions as load_curation


def _p(pid, text):
    return {"id": pid, "text": text}


@pytest.fixture
def seeds():
    def seed(i, itype, instruction, reversal):
        return {"id": f"s{i}", "query": f"query {i} about solar panels", "instruction": instruction,
                "instruction_type": itype, "domain": "energy",
                "positive": _p(f"s{i}-pos", f"positive passage {i} from the UK"),
                "instruction_negatives": [_p(f"s{i}-n0", f"negative zero {i} from the US"), _p(f"s{i}-n1", f"negative one {i}")],
                "hard_negatives": [_p(f"s{i}-h0", "off topic"), _p(f"s{i}-h1", "off topic too")],
                "reference_reversal": reversal}
    return [seed(0, "geography", "Only UK sources.", "Only US sources."),
            seed(1, "timeframe", "Only work after 2020.", "Only work before 2020."),
            seed(2, "geography", "Exclude Europe.", None)]


@pytest.fixture
def rows():
    return [
        {"key": "s0", "seed_id": "s0", "negative_index": 0, "negative_id": "s0-n0", "backend": "openai", "model": "m",
         "status": "accepted", "reason": None, "reversal": "Only US sources.", "reasoning": "why", "instruction_type": "geography",
         "verify_flip": True},
        {"key": "s1#1", "seed_id": "s1", "negative_index": 1, "negative_id": "s1-n1", "backend": "template", "model": None,
         "status": "declined", "reason": "no sound reversal", "reversal": None, "reasoning": None, "instruction_type": "timeframe"},
        {"key": "s2", "seed_id": "s2", "negative_index": 0, "negative_id": "s2-n0", "backend": "openai", "model": "m",
         "status": "rejected", "reason": "copies the instruction", "reversal": "Exclude Europe please.", "reasoning": None,
         "instruction_type": "geography", "verify_flip": False},
    ]


class FakeModel:
    """Embeds by looking texts up in a table: makes every cosine score known in advance."""

    prompts = {}

    def __init__(self, table):
        self.table = table

    def encode(self, texts, **kw):
        v = np.array([self.table[t] for t in texts], dtype=float)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def _flip_model(seed, reversal):
    from ifir_lib.models import format_query
    return FakeModel({format_query(seed["query"], seed["instruction"]): [1, 0], format_query(seed["query"], reversal): [0, 1],
                      seed["positive"]["text"]: [0.9, 0.1], seed["instruction_negatives"][0]["text"]: [0.1, 0.9]})


# ---- pure functions ----------------------------------------------------------------------------

def test_build_examples_from_seeds_alone_uses_reference_reversals(seeds):
    df = iw.build_examples(seeds)
    assert list(df["key"]) == ["s0", "s1"]                             # s2 has no reference reversal
    assert set(df["backend"]) == {"reference"} and set(df["status"]) == {"accepted"}
    assert df.iloc[0]["reversal"] == "Only US sources." and df.iloc[0]["negative_id"] == "s0-n0"


def test_build_examples_joins_rows_to_seeds(seeds, rows):
    df = iw.build_examples(seeds, rows).set_index("key")
    assert df.loc["s1#1", "negative"] == "negative one 1" and df.loc["s1#1", "status"] == "declined"
    assert df.loc["s0", "query"] == "query 0 about solar panels" and df.loc["s0", "verify_flip"] is True
    assert df.loc["s1#1", "verify_flip"] is None
    with pytest.raises(ValueError, match="names seed 'zz'"):
        iw.build_examples(seeds, [{**rows[0], "seed_id": "zz"}])
    with pytest.raises(ValueError, match="instruction negative 5"):
        iw.build_examples(seeds, [{**rows[0], "negative_index": 5}])


def test_filter_examples_each_filter(seeds, rows):
    df = iw.build_examples(seeds, rows)
    keys = lambda **kw: list(iw.filter_examples(df, **kw)["key"])  # noqa: E731
    assert keys() == ["s0", "s1#1", "s2"]
    assert keys(instruction_type="geography") == ["s0", "s2"]
    assert keys(backend="template") == ["s1#1"]
    assert keys(status="rejected") == ["s2"] and keys(status="(all)") == ["s0", "s1#1", "s2"]
    assert keys(verify="passed") == ["s0"] and keys(verify="failed") == ["s2"] and keys(verify="unverified") == ["s1#1"]
    assert keys(search="BEFORE 2020") == [] and keys(search="after 2020") == ["s1#1"] and keys(search="s2") == ["s2"]
    assert keys(search="from the us") == ["s0", "s2"]                  # N* passages are searched too (s1#1 shows n1)
    assert keys(decision="reject", decisions={"s2": "reject"}) == ["s2"]
    assert keys(decision="undecided", decisions={"s2": "reject"}) == ["s0", "s1#1"]
    assert keys(instruction_type="geography", status="accepted") == ["s0"]


def test_word_diff_marks_changed_words_and_escapes():
    a, b = inspect_tables.word_diff_html("Only UK sources.", "Only US sources.")
    assert a == f"Only {inspect_tables._DEL}UK</del> sources." and b == f"Only {inspect_tables._INS}US</ins> sources."
    a, b = inspect_tables.word_diff_html("no <b> tags", "no <i> tags")
    assert "&lt;b&gt;" in a and "<b>" not in a and "&lt;i&gt;" in b


def test_view_scores_and_flip_on_known_vectors(seeds):
    s = seeds[0]
    got = iw.view_scores(_flip_model(s, "Only US sources."), s["query"], s["instruction"], "Only US sources.",
                         s["positive"]["text"], s["instruction_negatives"][0]["text"])
    cos = 0.9 / np.hypot(0.9, 0.1)                                   # cos([1,0], [.9,.1])
    assert got["orig"]["pos"] == pytest.approx(cos) and got["rev"]["neg"] == pytest.approx(cos)
    assert got["orig"]["neg"] == pytest.approx(0.1 / np.hypot(0.9, 0.1)) and got["flips"] is True
    swapped = iw.view_scores(_flip_model(s, "Only US sources."), s["query"], "Only US sources.", s["instruction"],
                             s["positive"]["text"], s["instruction_negatives"][0]["text"])
    assert swapped["flips"] is False


@pytest.mark.slow
def test_view_scores_with_minilm(minilm, seeds):
    s = seeds[0]
    got = iw.view_scores(minilm, s["query"], s["instruction"], "Only US sources.", s["positive"]["text"],
                         s["instruction_negatives"][0]["text"])
    assert all(-1 <= got[v][d] <= 1 for v in ("orig", "rev") for d in ("pos", "neg")) and isinstance(got["flips"], bool)


def test_curation_store_last_decision_wins_and_survives_restart(tmp_path):
    path = tmp_path / "sub" / "curation.jsonl"
    st = iw.CurationStore(path)
    st.record("s0", "accept")
    st.record("s0", None, "looks fine")
    st.record("s1", "reject", "N* is still excluded")
    st.record("s0", "reject")
    with pytest.raises(ValueError):
        st.record("s0", "maybe")
    with pytest.raises(ValueError):
        st.record("s0")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(lines) == 4 and set(lines[0]) == {"key", "decision", "comment", "time"}
    assert lines[1] == {**lines[1], "key": "s0", "decision": None, "comment": "looks fine"}
    again = iw.CurationStore(path)
    assert again.decisions == {"s0": "reject", "s1": "reject"} == load_curation(path)
    assert again.comments == {"s0": ["looks fine"], "s1": ["N* is still excluded"]}
    assert again.summary() == {"accept": 0, "reject": 2, "commented": 2}


# ---- the widget, driven as a user would --------------------------------------------------------

def test_explorer_navigation_filters_and_position(seeds, rows, tmp_path):
    e = iw.Explorer(seeds, rows, curation_path=tmp_path / "c.jsonl")
    assert e.position_label.value == "1 / 3" and e.current["key"] == "s0" and e.prev_button.disabled
    assert "<del" in e.detail.value and "<ins" in e.detail.value    # the instruction diff is shown
    e.next_button.click()
    assert e.position_label.value == "2 / 3" and e.current["key"] == "s1#1"
    assert "no reversal (declined: no sound reversal)" in e.detail.value
    e.next_button.click()
    e.next_button.click()                                            # stops at the end
    assert e.position_label.value == "3 / 3" and e.next_button.disabled
    e.prev_button.click()
    assert e.current["key"] == "s1#1"
    e.type_filter.value = "geography"                                # s1#1 no longer matches -> first
    assert e.position_label.value == "1 / 2" and e.current["key"] == "s0"
    e.next_button.click()
    e.backend_filter.value = "openai"                                # s2 still matches: stays on it
    assert e.current["key"] == "s2" and e.position_label.value == "2 / 2"
    e.verify_filter.value = "passed"
    assert e.position_label.value == "1 / 1" and e.current["key"] == "s0"
    e.status_filter.value = "rejected"
    assert e.position_label.value == "0 / 0" and e.current is None and e.accept_button.disabled
    assert "No example matches" in e.detail.value
    e.accept_button.click()                                          # nothing on screen: nothing written
    assert not (tmp_path / "c.jsonl").exists()
    e.status_filter.value = e.verify_filter.value = e.type_filter.value = e.backend_filter.value = "(all)"
    e.search_box.value = "after 2020"
    assert e.position_label.value == "1 / 1" and e.current["key"] == "s1#1"
    assert set(e.type_filter.options) == {"(all)", "geography", "timeframe"}
    assert set(e.backend_filter.options) == {"(all)", "openai", "template"}


def test_explorer_buttons_persist_to_the_curation_file(seeds, rows, tmp_path):
    path = tmp_path / "c.jsonl"
    e = iw.Explorer(seeds, rows, curation_path=path)
    e.accept_button.click()                                          # s0, then moves on to s1#1
    assert e.current["key"] == "s1#1"
    e.comment_box.value = "the negative is borderline"
    e.comment_button.click()
    e.reject_button.click()
    e.prev_button.click()
    e.prev_button.click()
    e.comment_box.value = "on second thought"
    e.reject_button.click()                                          # s0 again: the comment travels with it
    rows_ = [json.loads(x) for x in path.read_text().splitlines()]
    assert [(r["key"], r["decision"], r["comment"]) for r in rows_] == [
        ("s0", "accept", None), ("s1#1", None, "the negative is borderline"), ("s1#1", "reject", None),
        ("s0", "reject", "on second thought")]
    assert load_curation(path) == {"s0": "reject", "s1#1": "reject"}
    # a new kernel: state comes back from the file
    e2 = iw.Explorer(seeds, rows, curation_path=path)
    assert "<b>Decision:</b> reject" in e2.detail.value and "on second thought" in e2.detail.value
    e2.decision_filter.value = "undecided"
    assert e2.position_label.value == "1 / 1" and e2.current["key"] == "s2"
    e2.accept_button.click()                                         # s2 leaves the undecided view on refresh
    e2.decision_filter.value = "accept"
    assert [k for k in e2.filtered["key"]] == ["s2"]


def test_explorer_shows_model_scores_and_flip(seeds, tmp_path):
    s = seeds[0]
    e = iw.Explorer(seeds[:1], curation_path=tmp_path / "c.jsonl", model=_flip_model(s, s["reference_reversal"]))
    assert "<b>Model flips:</b> yes" in e.detail.value and "score 0.994" in e.detail.value
    e2 = iw.Explorer(seeds[:1], curation_path=tmp_path / "c.jsonl")   # no model: a hint, no scores
    assert "Model flips" not in e2.detail.value and "type a model name" in e2.detail.value
    e2.model_box.value = "/no/such/model"                             # a bad name is reported, not raised
    assert "model not loaded" in e2.detail.value


def test_load_for_inspection_falls_back_to_reference_reversals(seeds, rows, tmp_path):
    seeds_file, synth = tmp_path / "seeds.jsonl", tmp_path / "reversals.jsonl"
    seeds_file.write_text("".join(json.dumps(s) + "\n" for s in seeds))
    got_seeds, got_rows = iw.load_for_inspection(seeds_file, tmp_path / "absent.jsonl")
    assert [s["id"] for s in got_seeds] == ["s0", "s1", "s2"] and got_rows is None
    synth.write_text("".join(json.dumps(r) + "\n" for r in rows))
    other = tmp_path / "other_backend.jsonl"
    other.write_text(json.dumps({**rows[0], "backend": "reference"}) + "\n")   # same key, another backend
    _, got_rows = iw.load_for_inspection(seeds_file, [synth, other])
    assert [(r["key"], r["backend"]) for r in got_rows] == [("s0", "openai"), ("s1#1", "template"), ("s2", "openai"), ("s0", "reference")]
