"""Matched-budget training sets: views, budgets, exclusions, curation."""

import hashlib
import json

import pytest

from ifir_lib.core.errors import ConfigError, DataError
from ifir_lib.curation.decisions import load_decisions as load_curation
from ifir_lib.seeds.schema import NARRATIVE_FIELDS
from ifir_lib.testing.inputs import make_seed
from ifir_lib.training.trainsets import (
    build_trainset,
    check_decisions_name_seeds,
    load_reversals,
    load_trainset,
    save_trainset,
    seeds_for_budget,
)


def test_budgets_are_matched(bundled_seeds):
    budget = 48
    sets = {
        m: build_trainset(m, bundled_seeds, budget=budget, num_negatives=5)
        for m in ("ins-orig", "ins-dv", "all-orig", "all-dv")
    }
    # Ins-* at B examples; All-* take B x 440/480 seeds, two views each (the paper's 480k vs ~880k)
    r = round(budget * 440 / 480)
    assert r == seeds_for_budget("all-dv", budget) == 44
    assert {m: (s.counts["seeds_used"], len(s.examples)) for m, s in sets.items()} == {
        "ins-orig": (budget, budget),
        "ins-dv": (budget // 2, budget),
        "all-orig": (r, 2 * r),
        "all-dv": (r, 2 * r),
    }
    assert {m: s.manifest()["budget"] for m, s in sets.items()} == dict.fromkeys(sets, budget)
    assert sets["ins-orig"].counts["views"] == {"orig": 48, "dv": 0, "query": 0}
    assert sets["ins-dv"].counts["views"] == {"orig": 24, "dv": 24, "query": 0}
    assert sets["all-orig"].counts["views"] == {"orig": 44, "dv": 0, "query": 44}
    assert sets["all-dv"].counts["views"] == {"orig": 44, "dv": 44, "query": 0}
    # the bundled seeds carry no source counterparts: every bare-query view is built from its seed
    assert sets["all-orig"].counts["counterparts"] == {"source": 0, "built": 44}
    # the wording control: Ins-DV's budget and seeds, the second view reworded with the same labels
    aug = build_trainset("ins-aug", bundled_seeds, budget=budget, num_negatives=5)
    assert aug.counts["views"] == {"orig": 24, "dv": 0, "query": 0, "aug": 24}
    assert {e["group"] for e in aug.examples} == {e["group"] for e in sets["ins-dv"].examples}
    for o, a in zip(aug.examples[::2], aug.examples[1::2]):
        assert (
            a["view"] == "aug" and a["positive"] == o["positive"] and a["negatives"][:1] == o["negatives"][:1]
        )
        assert a["instruction"] != o["instruction"]
    # one seed order: Ins-DV's seeds < All-*'s (the same for both) < Ins-orig's
    groups = lambda s: set(e["group"] for e in s.examples)
    assert groups(sets["all-orig"]) == groups(sets["all-dv"])
    assert groups(sets["ins-dv"]) < groups(sets["all-dv"]) < groups(sets["ins-orig"])


def test_all_dv_holds_seeds_ins_dv_never_sees(tmp_path):
    """At one budget All-DV is no copy of Ins-DV: a strict superset of its seeds, other examples."""
    from ifir_lib.core.config import SEEDS_PATH

    ins = build_trainset("ins-dv", SEEDS_PATH, budget=12, num_negatives=3)
    all_dv = build_trainset("all-dv", SEEDS_PATH, budget=12, num_negatives=3)
    ins_ids = {e["group"] for e in ins.examples}
    all_ids = {e["group"] for e in all_dv.examples}
    assert len(ins_ids) == 6 and len(all_ids) == 11 and ins_ids < all_ids
    assert len(all_dv) == 22 and all_dv.manifest()["sha256"] != ins.manifest()["sha256"]
    # Ins-DV's examples are All-DV's first ones (same seeds first, same views, same draws)
    assert all_dv.examples[: len(ins)] == ins.examples
    # All-DV at 12 is Ins-DV at 22: the same 11 seeds in both views, so the same examples
    assert (
        build_trainset("ins-dv", SEEDS_PATH, budget=22, num_negatives=3).manifest()["sha256"]
        == (all_dv.manifest()["sha256"])
    )


def test_all_modes_need_more_seeds_and_none_takes_every_usable_one(bundled_seeds):
    seeds = bundled_seeds[:10]
    assert len(build_trainset("ins-dv", seeds, budget=12, num_negatives=3)) == 12  # 6 seeds
    with pytest.raises(ConfigError, match="budget 12 needs 11 seeds for all-dv, only 10 usable") as e:
        build_trainset("all-dv", seeds, budget=12, num_negatives=3)
    allowed = int(str(e.value).split("; budget ")[1].split(" fits them (even")[0])
    assert allowed % 2 == 0 and len(build_trainset("all-dv", seeds, budget=allowed, num_negatives=3)) > 0
    assert len(build_trainset("ins-dv", seeds, budget=allowed, num_negatives=3)) == allowed  # advice for both
    # None: every usable seed, recorded under the smallest Ins-* budget that takes that many
    ts = build_trainset("all-orig", seeds, num_negatives=3)
    assert (ts.counts["seeds_used"], len(ts)) == (10, 20)
    b = ts.counts["budget"]
    assert seeds_for_budget("all-orig", b) == 10 > seeds_for_budget("all-orig", b - 1)
    assert [seeds_for_budget("all-dv", b) for b in (1, 2, 6, 11, 12, 480_000)] == [1, 2, 6, 10, 11, 440_000]


def test_all_orig_takes_the_source_counterpart_when_the_seed_has_one(bundled_seeds):
    """A seed carrying its source's bare-query row trains on that row's passages; the others on
    the counterpart built from the seed; the counts say which is which."""
    seeds = [dict(s) for s in bundled_seeds[:12]]
    extra = {"id": "cp-hard", "text": "a hard negative of the bare query only"}
    for s in seeds[::2]:
        s["counterpart_positive"] = {"id": "cp-pos-" + s["id"], "text": "the bare query's own positive"}
        s["counterpart_hard_negatives"] = [extra, s["instruction_negatives"][0]]
    ts = build_trainset("all-orig", seeds, budget=12, num_negatives=4)
    assert ts.counts["counterparts"] == {"source": 6, "built": 5}
    by_id = {s["id"]: s for s in seeds}
    for e in (e for e in ts.examples if e["view"] == "query"):
        s = by_id[e["group"]]
        neg = [p["id"] for p in e["negatives"]]
        ins_neg = {p["id"] for p in s["instruction_negatives"]}
        assert e["instruction"] == "" and not ins_neg & set(neg) and s["positive"]["id"] not in neg
        if "counterpart_positive" in s:  # the source row: its positive, its hard negatives first
            assert e["positive"] == s["counterpart_positive"] and neg[0] == "cp-hard"
        else:  # built: the seed's positive and hard negatives
            assert e["positive"] == s["positive"] and neg[0] == s["hard_negatives"][0]["id"]


def test_dual_view_swaps_labels(bundled_seeds):
    seed = bundled_seeds[0]
    ts = build_trainset("all-dv", bundled_seeds, num_negatives=5, narrative_share=0)
    orig = next(e for e in ts.examples if e["id"] == seed["id"] + "::orig")
    dv = next(e for e in ts.examples if e["id"] == seed["id"] + "::dv")
    n_star = seed["instruction_negatives"][0]
    assert orig["positive"] == seed["positive"] and n_star in orig["negatives"]
    assert dv["positive"] == n_star and dv["negatives"][0] == seed["positive"]
    assert dv["query"] == orig["query"] and dv["instruction"] == seed["reference_reversal"]
    assert all(len(e["negatives"]) == 5 for e in ts.examples)


def _with_narratives(seeds):
    """Seeds carrying narratives whose text names the field and seed, so each view can be traced."""
    return [{**s, **{f: f"{f} of {s['id']}" for f in NARRATIVE_FIELDS}} for s in seeds]


def test_narrative_form_is_drawn_per_seed_and_shared_by_every_mode(bundled_seeds):
    seeds = _with_narratives(bundled_seeds[:60])
    sets = {
        m: build_trainset(m, seeds, budget=40, num_negatives=3, rng_seed=1)
        for m in ("ins-orig", "ins-dv", "ins-aug")
    }
    narrative = {e["group"] for e in sets["ins-orig"].examples if e["instruction"].startswith("narrative of")}
    assert 8 <= len(narrative) <= 32 and sets["ins-orig"].counts["forms"]["narrative"] == len(narrative)
    for mode, field in (("ins-dv", "reversal_narrative"), ("ins-aug", "aug_narrative")):
        for o, second in zip(sets[mode].examples[::2], sets[mode].examples[1::2]):
            g = o["group"]  # same form as in ins-orig (whose seeds include these), the pair in one form
            if g in narrative:
                assert (o["instruction"], second["instruction"]) == (f"narrative of {g}", f"{field} of {g}")
            else:
                assert "narrative" not in o["instruction"] + second["instruction"]
    # share 0 and 1, and reversals that are not the reference ones, keep the short form
    short = build_trainset("ins-dv", seeds, budget=20, num_negatives=3, narrative_share=0)
    assert short.counts["forms"] == {"short": 10, "narrative": 0}
    full = build_trainset("ins-dv", seeds, budget=20, num_negatives=3, narrative_share=1)
    assert full.counts["forms"] == {"short": 0, "narrative": 10}
    template = build_trainset("ins-dv-template", seeds, budget=20, num_negatives=3, narrative_share=1)
    assert template.counts["forms"] == {"short": 10, "narrative": 0}
    with pytest.raises(ConfigError, match="narrative_share"):
        build_trainset("ins-dv", seeds, budget=20, narrative_share=1.5)


def test_counterpart_never_uses_instruction_negatives_as_negatives(bundled_seeds):
    ts = build_trainset("all-orig", bundled_seeds, budget=20, num_negatives=6)
    by_seed = {s["id"]: s for s in bundled_seeds}
    for e in ts.examples:
        if e["view"] == "query":
            ins_neg = {p["id"] for p in by_seed[e["group"]]["instruction_negatives"]}
            assert e["instruction"] == "" and not ins_neg & {p["id"] for p in e["negatives"]}


@pytest.mark.parametrize("mode", ["ins-orig", "all-orig"])
def test_a_positive_s_text_under_another_id_is_never_its_negative(mode):
    """One passage exported per seed under new ids: padding drew it, by its other id, as a negative
    of the very example it answers (8 of 400 bundled seeds' examples in the probe)."""
    seeds = [make_seed(i) for i in range(12)]
    for s in seeds[6:]:  # seeds 6-11 share seeds 0-5's positive passage, each under its own id
        s["positive"]["text"] = seeds[int(s["id"][-4:]) - 6]["positive"]["text"] + " "
    for rng_seed in range(5):
        ts = build_trainset(mode, seeds, budget=12, num_negatives=8, rng_seed=rng_seed)
        for e in ts.examples:
            texts = {p["text"].strip() for p in e["negatives"]}
            assert e["positive"]["text"].strip() not in texts, (e["id"], rng_seed)


def test_a_positive_respelled_among_its_own_hard_negatives_is_not_trained_as_one():
    """A seed's positive mined back under other ids, re-spaced or re-cased: it was kept as a
    negative of its own example (``_fill`` compared stripped text only)."""
    seeds = [make_seed(i) for i in range(6)]
    pos = seeds[0]["positive"]["text"]
    seeds[0]["hard_negatives"] = [
        {"id": "mined-77", "text": pos.replace(" ", "  ", 1)},
        {"id": "mined-78", "text": pos.upper()},
        *seeds[0]["hard_negatives"],
    ]
    ts = build_trainset("ins-orig", seeds, budget=6, num_negatives=4, rng_seed=0)
    (orig,) = [e for e in ts.examples if e["group"] == "seed-0000"]
    assert not {"mined-77", "mined-78"} & {p["id"] for p in orig["negatives"]}


def test_declined_rejected_and_curated_are_excluded_and_counted(bundled_seeds, tmp_path, caplog):
    seeds = bundled_seeds[:10]
    syn = tmp_path / "syn.jsonl"
    rows = [
        {"seed_id": s["id"], "status": "accepted", "reversal": "Find X.", "negative_index": 0}
        for s in seeds[:6]
    ]
    rows += [
        {"seed_id": seeds[6]["id"], "status": "declined", "reversal": None},
        {"seed_id": seeds[7]["id"], "status": "rejected", "reversal": None, "reason": "near-copy"},
    ]
    syn.write_text("".join(json.dumps(r) + "\n" for r in rows))
    counts = {}
    revs = load_reversals(syn, counts)
    assert counts == {"reversals_declined": 1, "reversals_rejected": 1} and len(revs) == 6
    cur = tmp_path / "cur.jsonl"
    cur.write_text(
        json.dumps({"key": seeds[0]["id"], "decision": "reject"})
        + "\n"
        + json.dumps({"key": seeds[1]["id"], "decision": "reject"})
        + "\n"
        + json.dumps({"key": seeds[1]["id"], "decision": "accept"})
        + "\n"  # last decision wins
        + json.dumps({"key": seeds[1]["id"], "decision": None, "comment": "ok"})
        + "\n"
    )
    ts = build_trainset("ins-dv", seeds, revs, num_negatives=3, curation=load_curation(cur))
    assert ts.counts["curated_out"] == 1 and ts.counts["no_reversal"] == 4
    assert ts.counts["seeds_used"] == 5 and seeds[0]["id"] not in {e["group"] for e in ts.examples}
    with pytest.raises(ValueError, match="only 5 usable"):
        build_trainset("ins-dv", seeds, revs, budget=12, num_negatives=3, curation=load_curation(cur))
    # a curation file of another seed set (or keys respelled): every rejected reversal was trained
    other = tmp_path / "other.jsonl"
    other.write_text(
        "".join(json.dumps({"key": s["id"].lower(), "decision": "reject"}) + "\n" for s in seeds[:3])
    )
    with pytest.raises(ConfigError, match="none of the 3 curation decisions names a seed of this set"):
        check_decisions_name_seeds(load_curation(other), [s["id"] for s in seeds])  # train_modes' check
    check_decisions_name_seeds(load_curation(cur), [s["id"] for s in seeds])  # the right file
    # decisions all about seeds an experiment holds out: checked against every seed, no error;
    # the training set's own check only warns
    build_trainset("ins-dv", seeds[2:], revs, num_negatives=3, curation=load_curation(cur))
    assert "2 of 2 curation decisions name no seed trained here" in caplog.text
    other.write_text(cur.read_text() + json.dumps({"key": "B-001#0", "decision": "reject"}) + "\n")
    ts = build_trainset("ins-dv", seeds, revs, num_negatives=3, curation=load_curation(other))
    assert (
        ts.counts["curated_out"] == 1 and "1 of 3 curation decisions name no seed trained here" in caplog.text
    )


def test_training_file_errors_name_file_and_line(tmp_path, bundled_seeds):
    ts = build_trainset("ins-orig", bundled_seeds, budget=4, num_negatives=3)
    path = save_trainset(ts, tmp_path / "train.jsonl")
    assert len(load_trainset(path)) == 4
    lines = path.read_text().splitlines()
    lines_kept = list(lines)  # the file as built: a bad row below replaces line 3 with its own row
    bad = json.loads(lines[2])
    del bad["positive"]
    lines[2] = json.dumps(bad)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"train\.jsonl:3: field 'positive': missing"):
        load_trainset(path)
    bad = json.loads(lines[0])
    bad["negatives"] = []
    lines[2] = json.dumps(bad)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"train\.jsonl:3: field 'negatives'"):
        load_trainset(path)
    for other_id, what in ((True, "text"), (False, "id")):  # the positive among its own negatives
        bad = json.loads(lines_kept[2])  # both were read without a word
        twin = dict(bad["positive"], id="mined-dup-17", text=bad["positive"]["text"].upper() + " ")
        bad["negatives"] = [bad["negatives"][0], twin if other_id else dict(bad["positive"])]
        lines[2] = json.dumps(bad)
        path.write_text("\n".join(lines) + "\n")
        with pytest.raises(
            DataError, match=rf"train\.jsonl:3: field 'negatives\[1\]': is the positive \(its {what}\)"
        ):
            load_trainset(path)


def test_two_built_sets_numbered_alike_are_refused_and_a_repeat_read_once(tmp_path, caplog):
    """Two built sets whose seed files both numbered passages from 0, concatenated: a batch encodes
    each passage id once, so the second set's examples trained on the first set's texts."""
    a = [make_seed(i) for i in range(4)]
    b = [make_seed(i + 10) for i in range(4)]
    for i, s in enumerate(b):  # another export, numbered from 0 too
        s["id"], s["positive"]["id"] = f"other-{i}", a[i]["positive"]["id"]
    lines = []
    for name, seeds in (("a", a), ("b", b)):
        path = save_trainset(build_trainset("ins-orig", seeds, num_negatives=3), tmp_path / f"{name}.jsonl")
        lines += path.read_text().splitlines()
    both = tmp_path / "both.jsonl"
    both.write_text("\n".join(lines) + "\n")
    with pytest.raises(
        DataError,
        match=r"both\.jsonl:[5-8]: field 'positive': passage id 'pos-000\d' has another text on line [1-4]",
    ):
        load_trainset(both)
    twice = tmp_path / "twice.jsonl"
    twice.write_text("\n".join(lines[:4] * 2) + "\n")
    assert len(load_trainset(twice)) == 4 and "4 example(s) repeat an earlier line exactly" in caplog.text
    caplog.clear()
    no_ids = [
        json.dumps({k: v for k, v in json.loads(x).items() if k not in ("id", "group")}) for x in lines[:4]
    ]
    twice.write_text("\n".join(no_ids * 2) + "\n")  # rows without ids are repeats all the same
    assert len(load_trainset(twice)) == 4 and "4 example(s) repeat" in caplog.text
    one_id = [json.dumps(json.loads(x) | {"id": "q1", "view": "orig"}) for x in lines[:4]]  # built rows
    twice.write_text("\n".join(one_id) + "\n")
    with pytest.raises(DataError, match=r"twice\.jsonl:2: field 'id': example id 'q1' is on line 1 too"):
        load_trainset(twice)
    per_query = [
        json.dumps({k: v for k, v in json.loads(x).items() if k != "view"} | {"id": "q1"}) for x in lines[:4]
    ]
    twice.write_text("\n".join(per_query) + "\n")  # another toolkit's rows: an id shared on purpose
    assert len(load_trainset(twice)) == 4
    with pytest.raises(DataError, match="passage id 'pos-000\\d' has another text"):
        build_trainset("ins-orig", a + b, num_negatives=3)  # seeds given as a list are checked too


def test_ablation_modes_are_ins_dv_with_one_thing_changed():
    from ifir_lib.synthesis.template import template_reversal
    from ifir_lib.testing.inputs import make_seed
    from ifir_lib.training.trainer import TrainConfig, mode_config

    seeds = [{**make_seed(i), "aug_instruction": f"Reworded {i}."} for i in range(8)]
    dv = build_trainset("ins-dv", seeds, budget=8, num_negatives=3)
    tpl = build_trainset("ins-dv-template", seeds, budget=8, num_negatives=3)
    assert tpl.mode == "ins-dv-template" and [e["id"] for e in tpl.examples] == [e["id"] for e in dv.examples]
    for e in tpl.examples:
        seed = next(s for s in seeds if s["id"] == e["group"])
        if e["view"] == "dv":
            assert e["instruction"] == template_reversal(seed["instruction"]) != seed["reference_reversal"]
            assert e["positive"] == seed["instruction_negatives"][0]
    cfg = TrainConfig.preset("smoke")
    assert mode_config(cfg, "ins-dv-nocobatch").co_batch_views is False
    assert mode_config(cfg.replace(co_batch_views=False), "ins-dv-cobatch").co_batch_views is True
    assert mode_config(cfg, "ins-dv-inbatch").in_batch_negatives is True
    assert mode_config(cfg, "ins-dv-template") == cfg == mode_config(cfg, "ins-dv")


def test_an_ablation_that_changes_nothing_says_so(caplog):
    """Under a co-batching preset ``ins-dv-cobatch`` is Ins-DV: the docs called it an ablation of the cpu preset."""
    from ifir_lib.training.trainer import TrainConfig, mode_config

    cfg = TrainConfig.preset("cpu")
    with caplog.at_level("WARNING"):
        assert mode_config(cfg, "ins-dv-cobatch") == mode_config(cfg, "ins-dv")
        assert "ins-dv-cobatch changes nothing here" in caplog.text
        caplog.clear()
        mode_config(cfg, "ins-dv-nocobatch"), mode_config(cfg, "ins-dv-template"), mode_config(cfg, "ins-dv")
        assert "changes nothing" not in caplog.text


def test_abstract_mode_trains_the_abstract_reversals_and_needs_them():
    from ifir_lib.testing.inputs import make_seed

    seeds = [make_seed(i) for i in range(10)]
    seeds = [
        {**s, "abstract_reversal": f"abstract reversal of {s['id']}"} if i % 5 else s
        for i, s in enumerate(seeds)
    ]
    ts = build_trainset("ins-dv-abstract", seeds, budget=16, num_negatives=3)
    dv = [e for e in ts.examples if e["view"] == "dv"]
    assert len(dv) == 8 and {e["group"] for e in ts.examples} == {
        s["id"] for i, s in enumerate(seeds) if i % 5
    }
    for e in dv:
        seed = next(s for s in seeds if s["id"] == e["group"])
        k = seed.get("reference_negative_index") or 0
        assert (
            e["instruction"] == seed["abstract_reversal"]
            and e["positive"] == seed["instruction_negatives"][k]
        )
    plain = [{k: v for k, v in s.items() if k != "abstract_reversal"} for s in seeds]
    with pytest.raises(ConfigError):
        build_trainset("ins-dv-abstract", plain, budget=16, num_negatives=3)


def _syn_row(seed, j=0, reversal=None, **identity):
    """A synthesis output row for ``seed`` against its instruction negative ``j``, written for the
    seed as it is (``seed_sha``, ``negative_id``) unless ``identity`` overrides or drops them."""
    from ifir_lib.seeds.schema import seed_fingerprint

    row = {
        "key": seed["id"],
        "seed_id": seed["id"],
        "status": "accepted",
        "reversal": reversal or f"reversal of {seed['id']} for {seed['instruction_negatives'][j]['id']}",
        "negative_index": j,
        "negative_id": seed["instruction_negatives"][j]["id"],
        "seed_sha": seed_fingerprint(seed, j),
        **identity,
    }
    return {k: v for k, v in row.items() if v is not None}


def _write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_stale_reversals_are_not_trained_and_a_redone_row_wins(tmp_path, caplog):
    """A reversal written for an earlier version of its seed (instruction edited, negatives
    reordered) is never paired with the seed as it is now: the redone row appended after it is
    trained, a seed with only stale rows is left out, counted and named in one warning."""
    from ifir_lib.testing.inputs import make_seed

    old = [make_seed(i) for i in range(6)]
    new = [dict(s) for s in old]
    for i in (0, 1):  # edited after synthesis: new instruction, negatives re-mined in another order
        new[i] = {
            **old[i],
            "instruction": "Only consider studies conducted in Kenya.",
            "instruction_negatives": old[i]["instruction_negatives"][::-1],
        }
    rows = [_syn_row(s) for s in old] + [_syn_row(new[0], reversal="redone for seed-0000")]
    # seed-0002: a row of an earlier version without seed_sha; its negative_id still shows the reorder
    new[2] = {**old[2], "instruction_negatives": old[2]["instruction_negatives"][::-1]}
    rows[2] = _syn_row(old[2], seed_sha=None)
    # seed-0003: a row from before both fields existed is trusted (nothing to check it against)
    rows[3] = _syn_row(old[3], seed_sha=None, negative_id=None)
    revs = load_reversals(_write_rows(tmp_path / "syn.jsonl", rows))
    with caplog.at_level("WARNING", logger="ifir_lib.training.trainsets"):
        ts = build_trainset("ins-dv", new, revs, num_negatives=3, narrative_share=0)
    by_id = {e["id"]: e for e in ts.examples}
    dv0 = by_id["seed-0000::dv"]
    assert (
        dv0["instruction"] == "redone for seed-0000" and dv0["positive"] == new[0]["instruction_negatives"][0]
    )
    assert {e["group"] for e in ts.examples} == {"seed-0000", "seed-0003", "seed-0004", "seed-0005"}
    assert ts.counts["reversals_stale"] == 2 and ts.manifest()["reversals_stale"] == 2
    assert ts.counts["no_reversal"] == 2 and "reversals_unmatched" not in ts.counts
    warnings = [r.getMessage() for r in caplog.records if "earlier version" in r.getMessage()]
    assert len(warnings) == 1 and "of 2 seeds" in warnings[0] and "seed-0001, seed-0002" in warnings[0]
    # the seeds as they were still take every row's first reversal (the stale redo is never reached)
    assert "reversals_stale" not in build_trainset("ins-dv", old, revs, num_negatives=3).counts


def test_reversals_naming_no_seed_and_no_usable_seed_are_errors(tmp_path, caplog):
    """Reversals from another seed file: a warning with their count, then a ConfigError saying
    why no seed is usable (never a model trained on 0 examples); the same for seeds without any
    reversal, and for seeds too few to pad the negatives."""
    from ifir_lib.testing.inputs import make_seed

    seeds = [make_seed(i) for i in range(4)]
    other = [{**s, "id": "x" + s["id"]} for s in seeds]
    path = _write_rows(tmp_path / "syn.jsonl", [_syn_row(s) for s in seeds])
    with caplog.at_level("WARNING", logger="ifir_lib.training.trainsets"):
        with pytest.raises(ConfigError, match=f"none of the 4 accepted reversals in {path} names a seed"):
            build_trainset("ins-dv", other, load_reversals(path), num_negatives=3, seeds_name="other.jsonl")
    assert "4 of the 4 reversals" in caplog.text and "name no seed in other.jsonl" in caplog.text
    no_ref = [make_seed(i, reference=False) for i in range(4)]
    with pytest.raises(ConfigError, match="0 usable seeds for all-orig .*no seed has a reversal"):
        build_trainset("all-orig", no_ref, num_negatives=3)
    declined = _write_rows(tmp_path / "declined.jsonl", [{"seed_id": "seed-0000", "status": "declined"}])
    with pytest.raises(ConfigError, match=f"{declined} holds no accepted reversal"):
        build_trainset("all-dv", seeds, load_reversals(declined), num_negatives=3)
    seeds_file = tmp_path / "one.jsonl"
    seeds_file.write_text(json.dumps(make_seed(0)) + "\n")  # 4 negatives, none more to pad with
    with pytest.raises(
        ConfigError, match=f"{seeds_file}: seed 'seed-0000': cannot find 5 distinct negatives"
    ):
        build_trainset("ins-orig", seeds_file, num_negatives=5)


def test_malformed_reversal_rows_name_file_line_and_field(tmp_path):
    from ifir_lib.testing.inputs import make_seed

    seeds = [make_seed(i) for i in range(3)]
    for n, (field, value, message) in enumerate(
        [
            ("seed_id", 12, "must be a string"),
            ("negative_index", None, "must be a whole number"),
            ("negative_index", "0", "must be a whole number"),
            ("negative_index", True, "must be a whole number"),
            ("seed_sha", 5, "must be a string or absent"),
        ]
    ):
        rows = [_syn_row(s) for s in seeds]
        rows[1][field] = value
        path = _write_rows(tmp_path / f"bad{n}.jsonl", rows)
        with pytest.raises(DataError, match=f"{path}:2: field '{field}': {message}"):
            load_reversals(path)
    # an index past the seed's negatives: in a row without seed_sha / negative_id, malformed ...
    rows = [
        {"seed_id": s["id"], "status": "accepted", "reversal": "Find X.", "negative_index": 0} for s in seeds
    ]
    rows[2]["negative_index"] = 7
    path = _write_rows(tmp_path / "index.jsonl", rows)
    revs = load_reversals(path)
    with pytest.raises(DataError, match=f"{path}:3: field 'negative_index': names instruction negative 7"):
        build_trainset("ins-dv", seeds, revs, num_negatives=3)
    # ... in a row written for a seed that had more negatives then, stale
    rows = [_syn_row(s) for s in seeds]
    rows[2].update(negative_index=2, negative_id="neg-0002-2")
    ts = build_trainset("ins-dv", seeds, load_reversals(_write_rows(path, rows)), num_negatives=3)
    assert ts.counts["reversals_stale"] == 1 and ts.counts["seeds_used"] == 2


def test_under_negative_all_the_lowest_n_star_trains_whatever_the_file_order(tmp_path):
    """Rows are appended as the LLM answers arrive: the first accepted row per seed, the one
    trained, changed between two identical runs and again after a merge re-sorted the file."""
    seeds = [make_seed(i) for i in range(3)]
    rows = [_syn_row(s, j) for s in seeds for j in (1, 0)]  # N* 1 answered before N* 0
    shuffled = _write_rows(tmp_path / "a.jsonl", rows)
    in_order = _write_rows(tmp_path / "b.jsonl", [_syn_row(s, j) for s in seeds for j in (0, 1)])
    sets = [build_trainset("ins-dv", seeds, load_reversals(p), num_negatives=3) for p in (shuffled, in_order)]
    assert sets[0].examples == sets[1].examples
    dv = {e["id"]: e for e in sets[0].examples}["seed-0000::dv"]
    assert dv["positive"] == seeds[0]["instruction_negatives"][0]


def test_a_reversal_that_is_the_instruction_is_not_trained(tmp_path, caplog):
    """The reference backend and hand-made files pass no check: a reversal equal to I (case and
    spacing aside) made two examples of one query with swapped labels. A non-string reversal
    failed late, in training, naming no file."""
    seeds = [make_seed(i) for i in range(3)]
    rows = [_syn_row(s) for s in seeds]
    rows[1]["reversal"] = "  " + seeds[1]["instruction"].upper() + " "
    path = _write_rows(tmp_path / "syn.jsonl", rows)
    with caplog.at_level("WARNING", logger="ifir_lib.training.trainsets"):
        ts = build_trainset("ins-dv", seeds, load_reversals(path), num_negatives=3)
    assert ts.counts["reversals_copy_of_instruction"] == 1
    assert {e["group"] for e in ts.examples} == {"seed-0000", "seed-0002"}
    assert f"seed-0001 ({path}:2)" in caplog.text and "the seed's own instruction" in caplog.text
    rows[1]["reversal"] = {"instruction": "Only Kenya."}
    path = _write_rows(tmp_path / "bad.jsonl", rows)
    with pytest.raises(DataError, match=f"{path}:2: field 'reversal': must be a string"):
        load_reversals(path)


def test_an_accepted_row_that_today_s_checks_reject_is_not_trained(tmp_path, caplog):
    """Rows accepted before the decline and content checks ('N/A', '...') kept training, beside
    rows checked under the new rules."""
    seeds = [make_seed(i) for i in range(3)]
    rows = [_syn_row(s) for s in seeds]
    rows[0]["reversal"], rows[2]["reversal"] = "N/A", "..."
    path = _write_rows(tmp_path / "old.jsonl", rows)
    with caplog.at_level("WARNING", logger="ifir_lib.training.trainsets"):
        ts = build_trainset("ins-dv", seeds, load_reversals(path), num_negatives=3)
    assert ts.counts["reversals_failing_checks"] == 2
    assert {e["group"] for e in ts.examples} == {"seed-0001"}
    assert f"seed-0000 ({path}:1: a decline in words" in caplog.text


def test_random_padding_never_brings_back_same_query_passages_or_audit_drops(tmp_path):
    """``_fill`` pads with random pool passages: never, for a seed, the positive of a seed with its
    query (normalised: case and spacing aside; it answers the bare query, the rule mining uses),
    nor a passage the hard-negative audit dropped for that seed (relevant under I or I')."""
    seeds = [{**make_seed(i), "aug_instruction": f"Reworded {i}."} for i in range(8)]
    seeds[1]["query"] = "  " + seeds[0]["query"].upper()  # the same query, spelled otherwise
    audit = tmp_path / "hard_negative_audit.jsonl"
    dropped = seeds[2]["positive"]  # reviewers found it relevant to seed 0
    sha = hashlib.sha256(dropped["text"].encode()).hexdigest()
    rows = [{"seed": "seed-0000", "hn": dropped["id"], "verdict": "drop", "text_sha256": sha}]
    audit.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def negatives(rng_seed, negative_audit):
        ts = build_trainset(
            "ins-orig", seeds, num_negatives=8, rng_seed=rng_seed, negative_audit=negative_audit
        )
        return {e["group"]: {p["id"] for p in e["negatives"]} for e in ts.examples}

    with_audit = [negatives(r, audit) for r in range(10)]
    assert not any({"pos-0001", "pos-0002"} & n["seed-0000"] for n in with_audit)
    assert not any("pos-0000" in n["seed-0001"] for n in with_audit)
    assert any("pos-0002" in n["seed-0000"] for n in (negatives(r, None) for r in range(10)))
    assert any("pos-0002" in n["seed-0003"] for n in with_audit)  # dropped for seed 0 only


@pytest.mark.parametrize("mode", ["ins-dv", "all-orig"])
def test_bundled_sets_at_30_negatives_hold_no_same_query_passage_or_audit_drop(bundled_seeds, mode):
    """The paper preset pads ~25 of 30 negatives at random: no example of the bundled seeds holds a
    passage the bundled audit dropped for its seed, or a same-query seed's positive."""
    from ifir_lib.core.config import NEGATIVE_AUDIT_PATH
    from ifir_lib.seeds.schema import normalized_text

    drops: dict[str, set] = {}
    for line in NEGATIVE_AUDIT_PATH.read_text().splitlines():
        r = json.loads(line)
        if r["verdict"] == "drop":
            drops.setdefault(r["seed"], set()).add(r["text_sha256"])
    by_query: dict[str, list] = {}
    for s in bundled_seeds:
        by_query.setdefault(normalized_text(s["query"]), []).append(s)
    query_of = {s["id"]: normalized_text(s["query"]) for s in bundled_seeds}
    hits = []
    for ex in build_trainset(mode, bundled_seeds, num_negatives=30, rng_seed=0).examples:
        others = (o for o in by_query[query_of[ex["group"]]] if o["id"] != ex["group"])
        twins = {normalized_text(o["positive"]["text"]) for o in others}
        for p in ex["negatives"]:
            if hashlib.sha256(p["text"].encode()).hexdigest() in drops.get(ex["group"], ()):
                hits.append((ex["id"], p["id"], "dropped"))
            elif normalized_text(p["text"]) in twins:
                hits.append((ex["id"], p["id"], "same query"))
    assert hits == []


def test_an_odd_budget_is_refused_where_two_views_would_train_one_example_less():
    """Budget 17: Ins-orig trained 17 examples, Ins-DV and Ins-aug 16, all recorded as 17 (probe 46 K)."""
    from ifir_lib.testing.inputs import make_seed

    seeds = [make_seed(i) for i in range(12)]
    assert len(build_trainset("ins-orig", seeds, budget=7, num_negatives=2).examples) == 7
    for mode in ("ins-dv", "ins-dv-nocobatch"):
        with pytest.raises(ConfigError, match="budget 7 is odd: .* 6 examples against Ins-orig's 7"):
            build_trainset(mode, seeds, budget=7, num_negatives=2)
    assert len(build_trainset("ins-dv", seeds, budget=8, num_negatives=2).examples) == 8
    for mode in ("all-orig", "all-dv"):  # no budget on one usable seed: the search began at budget 0
        assert build_trainset(mode, seeds[:1], num_negatives=2).counts["seeds_used"] == 1
    for mode in ("ins-orig", "ins-dv"):  # -2 took all but 2 seeds (-1 for "no limit"), unmatched
        with pytest.raises(ConfigError, match="budget -2: a budget is a positive number"):
            build_trainset(mode, seeds, budget=-2, num_negatives=2)


@pytest.mark.parametrize("mode", ["ins-orig", "ins-dv", "ins-aug", "all-dv"])
def test_a_cut_to_fewer_negatives_keeps_n_star_in_the_original_view(mode):
    """The cpu experiment preset trains 1 negative: the orig view kept the first instruction negative
    while the dv view made N* (the second) relevant, so 46% of the bundled Ins-DV seeds never saw P+
    against N* under I; every mode's orig view now holds N* first."""
    seeds = [make_seed(i, negatives=3) for i in range(8)]
    for s in seeds:
        s["reference_negative_index"] = 2
        s["aug_instruction"] = "Reworded: " + s["instruction"]
    ts = build_trainset(mode, seeds, budget=8, num_negatives=1, rng_seed=0, negative_audit=None)
    by = {s["id"]: s for s in seeds}
    for e in ts.examples:
        n_star = by[e["group"]]["instruction_negatives"][2]
        if e["view"] in ("orig", "aug"):
            assert e["negatives"] == [n_star], e["id"]
        else:
            assert e["positive"] == n_star and e["negatives"] == [by[e["group"]]["positive"]]
    # where the cut keeps N*, the seed's order stays: the examples (and runs made before) unchanged
    whole = build_trainset(mode, seeds, budget=8, num_negatives=3, rng_seed=0, negative_audit=None)
    for e in whole.examples:
        if e["view"] in ("orig", "aug"):
            assert e["negatives"] == by[e["group"]]["instruction_negatives"], e["id"]


@pytest.mark.parametrize("mode", ["ins-dv-abstract", "ins-dv-template", "ins-dv"])
def test_seeds_kept_short_because_their_reversal_has_no_narrative_are_counted_and_warned(mode, caplog):
    """ins-dv-abstract trained no narrative at share 0.5 while ins-dv trained 65% (both views): the
    ablation changed the instruction form too, without a word."""
    seeds = _with_narratives([{**make_seed(i), "abstract_reversal": f"Abstract {i}."} for i in range(12)])
    reversals = None
    if mode == "ins-dv":  # a synthesized file: reversals that are not the reference ones
        reversals = {s["id"]: {"reversal": f"Synthesized {s['id']}.", "negative_index": 0} for s in seeds}
    with caplog.at_level("WARNING"):
        ts = build_trainset(mode, seeds, reversals, budget=12, num_negatives=2, narrative_share=1)
        ref = build_trainset("ins-dv", seeds, budget=12, num_negatives=2, narrative_share=1)
    assert ts.counts["forms"] == {"short": 6, "narrative": 0} and ts.counts["narrative_unavailable"] == 6
    assert ref.counts["forms"] == {"short": 0, "narrative": 6} and "narrative_unavailable" not in ref.counts
    (said,) = [r.getMessage() for r in caplog.records if "have no narrative" in r.getMessage()]
    assert said.startswith(f"{mode}: 6 of the 6 seeds drawn into narrative form")


@pytest.mark.parametrize("mode", ["ins-dv-abstract", "ins-dv-template"])
def test_reversals_given_to_an_ablation_with_its_own_are_named_as_unused(mode, tmp_path, caplog):
    """`ifir train --mode ins-dv-abstract --reversals F` (an abstract synthesis file) trained the
    seeds' abstract_reversal field and ignored F without a word."""
    seeds = [{**make_seed(i), "abstract_reversal": f"Abstract {i}."} for i in range(6)]
    path = _write_rows(tmp_path / "syn.jsonl", [_syn_row(s, reversal=f"From F {s['id']}.") for s in seeds])
    with caplog.at_level("WARNING"):
        ts = build_trainset(mode, seeds, load_reversals(path), budget=6, num_negatives=2)
    assert not any(e["instruction"].startswith("From F") for e in ts.examples)
    (said,) = [r.getMessage() for r in caplog.records if "are not used for it" in r.getMessage()]
    assert said.startswith(f"{mode} trains the ") and str(path) in said
    caplog.clear()
    with caplog.at_level("WARNING"):
        build_trainset("ins-dv", seeds, load_reversals(path), budget=6, num_negatives=2)
    assert not [r for r in caplog.records if "are not used for it" in r.getMessage()]
    plain = [{k: v for k, v in s.items() if k != "abstract_reversal"} for s in seeds]
    with pytest.raises(ConfigError, match="no seed has an abstract_reversal"):
        build_trainset("ins-dv-abstract", plain, load_reversals(path), budget=6, num_negatives=2)


def test_the_narrative_warning_names_only_modes_built_and_compares_only_modes_that_differ(tmp_path, caplog):
    """One synthesized file given to ins-orig and ins-dv trains both short: every mode's warning
    said comparing it with a reference-reversal mode (none in the run) compared instruction forms."""
    from ifir_lib.pipelines.train import training_sets

    seeds = _with_narratives([{**make_seed(i), "abstract_reversal": f"Abstract {i}."} for i in range(12)])
    seeds_path = _write_rows(tmp_path / "seeds.jsonl", seeds)
    syn = _write_rows(tmp_path / "syn.jsonl", [_syn_row(s, reversal=f"Syn {s['id']}.") for s in seeds])
    kw = dict(seeds_path=seeds_path, preset="smoke", budget=12, narrative_share=1)
    with caplog.at_level("WARNING"):
        training_sets(("ins-orig", "ins-dv"), reversals_path=syn, **kw)
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("ins-dv: 6 of the 6 seeds drawn into narrative form") for m in said)
    assert not [m for m in said if "compares instruction forms" in m]  # both short: nothing differs
    caplog.clear()
    with caplog.at_level("WARNING"):
        training_sets(("ins-dv", "ins-dv-abstract"), **kw)
    (cmp,) = [r.getMessage() for r in caplog.records if "compares instruction forms" in r.getMessage()]
    assert (
        cmp.startswith(
            "ins-dv-abstract trains seeds drawn into narrative form in short form (ins-dv-abstract: 6 seeds;"
        )
        and "where ins-dv trains" in cmp
    )


def test_ins_aug_on_a_synthesized_file_warns_that_its_control_mirrors_the_reference_style(tmp_path, caplog):
    """The aug view is the seed's aug_instruction, written in its reference reversal's style, while
    Ins-DV trains the file's reversals: ins-aug was silently not their wording control."""
    seeds = [{**make_seed(i), "aug_instruction": f"Reworded {i}."} for i in range(8)]
    rows = [
        _syn_row(s, reversal=f"Syn {s['id']}." if i < 5 else s["reference_reversal"])
        for i, s in enumerate(seeds)
    ]
    path = _write_rows(tmp_path / "syn.jsonl", rows)
    with caplog.at_level("WARNING"):
        ts = build_trainset("ins-aug", seeds, load_reversals(path), budget=16, num_negatives=2)
        ref = build_trainset("ins-aug", seeds, budget=16, num_negatives=2)
    assert ts.counts["aug_reversal_not_reference"] == 5 and "aug_reversal_not_reference" not in ref.counts
    (said,) = [r.getMessage() for r in caplog.records if "wording control" in r.getMessage()]
    assert said.startswith(f"ins-aug: 5 of its 8 seeds have a reversal in {path} other than")


def test_the_template_ablation_s_other_original_view_at_one_negative_is_counted(caplog):
    """ins-dv-template targets instruction negative 0; at one negative its original view kept
    negative 0 where Ins-DV's kept the reference N*: the ablation changed two things, silently."""
    seeds = [{**make_seed(i), "reference_negative_index": i % 2} for i in range(8)]
    with caplog.at_level("WARNING"):
        tpl = build_trainset("ins-dv-template", seeds, budget=16, num_negatives=1, negative_audit=None)
        dv = build_trainset("ins-dv", seeds, budget=16, num_negatives=1, negative_audit=None)
    orig = {e["group"]: e["negatives"] for e in dv.examples if e["view"] == "orig"}
    differ = sum(e["negatives"] != orig[e["group"]] for e in tpl.examples if e["view"] == "orig")
    assert differ == 4 and tpl.counts["orig_not_ins_dv"] == 4 and "orig_not_ins_dv" not in dv.counts
    (said,) = [r.getMessage() for r in caplog.records if "another original view" in r.getMessage()]
    assert said.startswith("ins-dv-template: 4 of its 8 seeds train another original view than ins-dv")
    caplog.clear()
    with caplog.at_level("WARNING"):
        wide = build_trainset("ins-dv-template", seeds, budget=16, num_negatives=2, negative_audit=None)
    assert "orig_not_ins_dv" not in wide.counts and "another original view" not in caplog.text
