"""The curation file: last decision wins, comments kept, survives a restart; a decision is about
the text it judged."""

import json
import logging

import pytest

from ifir_lib.curation import widgets as iw
from ifir_lib.curation.decisions import decision_for, reversal_hash
from ifir_lib.curation.decisions import load_decisions as load_curation
from ifir_lib.training.trainsets import build_trainset


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


def _row(key, backend, reversal):
    return {
        "key": key,
        "backend": backend,
        "model": "m" if backend == "openai" else None,
        "reversal": reversal,
    }


def test_a_decision_applies_only_to_the_text_it_judged(tmp_path):
    """Two backends' rows under one key: rejecting the LLM's text, then accepting the template's,
    leaves the LLM's text rejected (it was the key's last decision before, so it became accept)."""
    path = tmp_path / "curation.jsonl"
    llm, tmpl = _row("s0", "openai", "LLM text."), _row("s0", "template", "Template text.")
    st = iw.CurationStore(path)
    st.record("s0", "reject", row=llm)
    st.record("s0", "accept", row=tmpl)
    line = json.loads(path.read_text().splitlines()[0])
    assert line == {**line, "backend": "openai", "model": "m", "reversal_sha": reversal_hash("LLM text.")}
    cur = load_curation(path)
    assert decision_for(cur, "s0", "LLM text.") == "reject"
    assert decision_for(cur, "s0", "Template text.") == "accept"
    assert decision_for(cur, "s0", "A third text.") is None and decision_for(cur, "s1", "LLM text.") is None
    assert iw.CurationStore(path).summary() == {"accept": 1, "reject": 1, "commented": 0}


def test_an_old_log_without_hashes_applies_by_key(tmp_path):
    path = tmp_path / "curation.jsonl"
    path.write_text(json.dumps({"key": "s0", "decision": "reject"}) + "\n")
    cur = load_curation(path)
    assert decision_for(cur, "s0", "any text") == "reject" == decision_for(cur, "s0", None)
    iw.CurationStore(path).record("s0", "accept", row=_row("s0", "openai", "LLM text."))
    cur = load_curation(path)  # the later, hashed decision wins for its own text only
    assert decision_for(cur, "s0", "LLM text.") == "accept" and decision_for(cur, "s0", "other") == "reject"
    assert decision_for({"s0": "reject"}, "s0", "whatever") == "reject", "a plain dict applies by key"


def test_training_leaves_out_the_rejected_text_and_names_stale_decisions(bundled_seeds, tmp_path, caplog):
    seeds = bundled_seeds[:8]
    path = tmp_path / "curation.jsonl"
    st = iw.CurationStore(path)
    revs = {s["id"]: {"reversal": f"LLM reversal {i}.", "negative_index": 0} for i, s in enumerate(seeds)}
    s0, s1 = seeds[0]["id"], seeds[1]["id"]
    st.record(s0, "reject", row=_row(s0, "openai", "LLM reversal 0."))
    st.record(s0, "accept", row=_row(s0, "template", "Template reversal 0."))
    st.record(s1, "reject", row=_row(s1, "template", "Template reversal 1."))
    with caplog.at_level(logging.WARNING):
        ts = build_trainset("ins-dv", seeds, revs, num_negatives=3, curation=load_curation(path))
    groups = {e["group"] for e in ts.examples}
    assert s0 not in groups and s1 in groups, "the LLM text rejected is out; the template reject is not its"
    assert ts.counts["curated_out"] == 1 and ts.counts["curation_stale"] == 2
    stale = [r.getMessage() for r in caplog.records if "judged another reversal text" in r.getMessage()]
    assert (
        len(stale) == 1
        and f"{s0} (accept of template)" in stale[0]
        and f"{s1} (reject of template)" in stale[0]
    )


def test_a_session_is_told_when_its_decision_overturns_another_sessions(tmp_path, caplog):
    """Two sessions on one file (two kernels of notebook 02, two curators) each read it when they
    opened. B's accept of a text A had rejected since was appended unseen and silently won, so the
    rejected reversal trained. B now reads A's rows before appending: the last decision still wins
    (the file's rule), but B is told, with the key and both decisions."""
    path = tmp_path / "curation.jsonl"
    llm = _row("s0", "openai", "LLM text.")
    a, b = iw.CurationStore(path), iw.CurationStore(path)
    a.record("s0", "reject", row=llm)
    with caplog.at_level(logging.WARNING):
        b.record("s0", "accept", row=llm)
    assert "s0: another session recorded 'reject' at " in caplog.text
    assert "this session's 'accept', decided without seeing it" in caplog.text and b.overturned
    assert load_curation(path) == {"s0": "accept"} == b.decisions  # B holds A's rows, in file order
    assert b.summary() == iw.CurationStore(path).summary() == {"accept": 1, "reject": 0, "commented": 0}
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        a.record("s1", "reject")  # A catches up on B's accept: another key, nothing to say
        assert a.decisions == {"s0": "accept", "s1": "reject"} and a.overturned is None
        b.record("s1", "reject")  # decided alike
        a.record("s0", "reject", row=_row("s0", "template", "Template text."))  # another text
        b.record("s0", None, "a comment decides nothing", row=llm)
    assert "another session" not in caplog.text and b.overturned is None
    assert decision_for(b.decisions, "s0", "LLM text.") == "accept"
    assert decision_for(b.decisions, "s0", "Template text.") == "reject"


def test_a_store_rereads_the_file_only_when_another_session_wrote_it(tmp_path, monkeypatch):
    """Every decision reread the whole file (8,000 scripted decisions: 130 s instead of 11 s)."""
    from ifir_lib.curation import decisions as D

    reads = []
    real = D.read_jsonl
    monkeypatch.setattr(D, "read_jsonl", lambda *a, **k: reads.append(1) or real(*a, **k))
    path = tmp_path / "curation.jsonl"
    mine, other = D.CurationStore(path), D.CurationStore(path)
    for i in range(5):
        mine.record(f"k{i}", "accept")
    alone = len(reads)
    other.record("k9", "reject")  # another session writes: the next decision reads it
    mine.record("k5", "accept")
    assert alone <= 1 and len(reads) > alone + 1 and mine.decisions.get("k9") is not None
