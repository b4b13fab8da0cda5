"""The bundled data as a whole: validation, statistics, the audit and the style shares."""

import json
import shutil
import subprocess
import sys

import pytest

from ifir_lib.core.config import FOLLOWIR_DIR, SEEDS_PATH
from ifir_lib.pipelines import bundle
from ifir_lib.seeds import schema as seed_io


def test_bundled_data_is_valid_and_large_enough():
    assert bundle.validate_bundle() == [] and bundle.validate_data() == []
    s = bundle.data_stats()
    assert s["seeds"] >= 1000 and len(s["instruction_types"]) >= 10 and len(s["domains"]) >= 16
    assert max(s["reversal_styles"].values()) <= 0.40 and abs(sum(s["reversal_styles"].values()) - 1) < 0.01
    assert s["eval_sets"]["v1"] == 32 and s["eval_sets"]["v2"] >= 64
    assert s["eval_queries"] >= 30 and s["eval_min_pool"] >= 20
    assert 40 <= s["passage_words"]["min"] and s["passage_words"]["max"] <= 120


def test_validator_catches_train_eval_overlap(tmp_path, bundled_seeds):
    ev = tmp_path / "ev"
    shutil.copytree(FOLLOWIR_DIR, ev)
    corpus = [json.loads(line) for line in (ev / "corpus.jsonl").read_text().splitlines()]
    corpus[0]["text"] = bundled_seeds[3]["hard_negatives"][0]["text"]
    (ev / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    problems = bundle.validate_bundle(SEEDS_PATH, ev)
    assert problems == [
        f"{ev / 'corpus.jsonl'}:1: field 'text': document {corpus[0]['_id']!r} repeats a training passage"
    ]


def test_validator_catches_overlap_up_to_form_and_in_every_instruction(tmp_path, bundled_seeds):
    """Normalised text (NFKC, case, spacing), a document as title + " " + text, and a query with its
    changed instruction that a seed trains on (the seed's query with its reference reversal)."""
    ev = tmp_path / "ev"
    shutil.copytree(FOLLOWIR_DIR, ev)
    corpus = [json.loads(line) for line in (ev / "corpus.jsonl").read_text().splitlines()]
    corpus[0]["text"] = "  " + bundled_seeds[3]["positive"]["text"].upper().replace(" ", "\n", 2)
    title, text = bundled_seeds[5]["hard_negatives"][1]["text"].split(" ", 1)
    corpus[1].update(title=title, text=text)
    (ev / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    queries = [json.loads(line) for line in (ev / "queries.jsonl").read_text().splitlines()]
    seed = bundled_seeds[7]
    queries[2].update(text=seed["query"], instruction_changed=seed["reference_reversal"].replace(" ", "  "))
    (ev / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    assert bundle.validate_bundle(SEEDS_PATH, ev) == [
        f"{ev / 'corpus.jsonl'}:1: field 'text': document {corpus[0]['_id']!r} repeats a training passage",
        f"{ev / 'corpus.jsonl'}:2: field 'title': document {corpus[1]['_id']!r} as title + ' ' + text "
        "repeats a training passage",
        f"{ev / 'queries.jsonl'}:3: field 'instruction_changed': query {queries[2]['_id']!r} with its "
        f"instruction_changed repeats training seed {seed['id']!r} (query + reference_reversal)",
    ]


@pytest.mark.parametrize(
    "respell",
    [
        lambda t: t.replace("'", "\u2019"),  # a word processor's apostrophe
        lambda t: t.replace("'", "&#39;"),  # an HTML export
        lambda t: t.replace("e", "e\u00ad", 1),  # a soft hyphen inside a word
        lambda t: t.replace(" ", " \u200b", 1),  # a zero-width space
    ],
    ids=["curly-quote", "html-entity", "soft-hyphen", "zero-width-space"],
)
def test_validator_catches_a_copy_respelled_by_another_export(tmp_path, bundled_seeds, respell):
    """Two exports of one text differ by more than Unicode form: each of these hid a copied
    evaluation document (``normalized_text`` compared NFKC, case and spacing only)."""
    ev = tmp_path / "ev"
    shutil.copytree(FOLLOWIR_DIR, ev)
    corpus = [json.loads(line) for line in (ev / "corpus.jsonl").read_text().splitlines()]
    text = next(s["positive"]["text"] for s in bundled_seeds if "'" in s["positive"]["text"])
    corpus[0]["text"] = respell(text)
    assert corpus[0]["text"] != text
    (ev / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    assert bundle.validate_bundle(SEEDS_PATH, ev) == [
        f"{ev / 'corpus.jsonl'}:1: field 'text': document {corpus[0]['_id']!r} repeats a training passage"
    ]


def test_cli_data_stats_json_last_line():
    out = subprocess.run(
        [sys.executable, "-m", "ifir_lib", "data", "stats", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    stats = json.loads(out.stdout.strip().splitlines()[-1])
    assert stats["seeds"] == len(seed_io.load_seeds()) and stats["eval_queries"] >= 30
    assert sum(stats["instruction_types"].values()) == stats["seeds"] and len(stats["domains"]) >= 10


def test_audit_must_cover_every_seed_with_a_passing_verdict(tmp_path):
    from ifir_lib.core.config import AUDIT_PATH

    rows = [json.loads(line) for line in AUDIT_PATH.read_text().splitlines()]
    kept = [r for r in rows if r["verdict"] != "drop"]
    bad = tmp_path / "audit.jsonl"
    bad.write_text(
        "".join(json.dumps({**r, "verdict": "drop"} if i == 0 else r) + "\n" for i, r in enumerate(kept))
    )
    problems = bundle.validate_bundle(audit_path=bad)
    assert len(problems) == 1 and f"{kept[0]['id']} has verdict 'drop' but is in the seeds" in problems[0]


def test_a_reversal_verdict_holds_only_for_the_texts_it_judged(tmp_path):
    from ifir_lib.core.config import AUDIT_PATH

    seeds = seed_io.load_seeds()
    rows = [json.loads(line) for line in AUDIT_PATH.read_text().splitlines()]
    line = {r["id"]: n for n, r in enumerate(rows, 1)}
    a, b = seeds[3]["id"], seeds[7]["id"]
    edits = {a: {"reference_reversal": "Find anything about it at all."}, b: {"instruction": "Only reviews."}}
    edited = tmp_path / "seeds.jsonl"
    edited.write_text("".join(json.dumps({**s, **edits.get(s["id"], {})}) + "\n" for s in seeds))
    problems = bundle.validate_bundle(edited, narrative_audit_path=None, abstract_audit_path=None)
    changed = "query, instruction, a passage, the reversal or the wording control changed after the review"
    assert problems == [f"{AUDIT_PATH}:{line[i]}: {i}: its {changed}" for i in (a, b)]
    unhashed = tmp_path / "audit.jsonl"  # a user's own audit file written before the hash
    unhashed.write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "texts_sha256"}) + "\n" for r in rows)
    )
    problems = bundle.validate_data(SEEDS_PATH, audits={"reversal": unhashed})
    assert len(problems) == len(seeds) and "no 'texts_sha256'" in problems[0]


def test_narratives_ship_only_with_a_passing_review_of_their_exact_text(tmp_path):
    from ifir_lib.core.config import NARRATIVE_AUDIT_PATH

    seeds = seed_io.load_seeds()
    with_narratives = [s for s in seeds if s.get("narrative")]
    assert len(with_narratives) >= 500 and bundle.data_stats()["with_narratives"] == len(with_narratives)
    rows = [json.loads(line) for line in NARRATIVE_AUDIT_PATH.read_text().splitlines()]
    shipped = {s["id"] for s in with_narratives}
    assert {r["id"] for r in rows if r["verdict"] == "pass"} == shipped  # a failed review ships nothing
    first = next(i for i, r in enumerate(rows) if r["id"] in shipped)
    bad = tmp_path / "audit.jsonl"
    bad.write_text(
        "".join(json.dumps({**r, "verdict": "fail"} if i == first else r) + "\n" for i, r in enumerate(rows))
    )
    problems = bundle.validate_bundle(narrative_audit_path=bad)
    assert problems == [f"{bad}:{first + 1}: {rows[first]['id']} has verdict 'fail' but ships narratives"]
    edited = tmp_path / "seeds.jsonl"
    changed = [
        {**s, "narrative": s["narrative"] + " Also blogs."} if s["id"] == rows[first]["id"] else s
        for s in seeds
    ]
    edited.write_text("".join(json.dumps(s) + "\n" for s in changed))
    problems = bundle.validate_bundle(edited, audit_path=None)
    assert problems == [
        f"{NARRATIVE_AUDIT_PATH}:{first + 1}: {rows[first]['id']}: the narratives changed after their review"
    ]


def test_style_shares_classify_phrasing():
    shares = bundle.style_shares(
        [
            "Skip anything before 2000.",
            "Which trials used a placebo?",
            "I need figures for Kenya.",
            "Only trials from Kenya.",
        ]
    )
    assert shares == {"exclusion": 0.25, "question": 0.25, "persona": 0.25, "affirmative": 0.25}


def test_abstract_reversals_ship_only_with_a_passing_review_of_their_exact_text(tmp_path):
    from ifir_lib.core.config import ABSTRACT_AUDIT_PATH

    seeds = seed_io.load_seeds()
    shipped = {s["id"] for s in seeds if s.get("abstract_reversal")}
    rows = [json.loads(line) for line in ABSTRACT_AUDIT_PATH.read_text().splitlines()]
    assert len(shipped) >= 1000 and {r["id"] for r in rows if r["verdict"] == "pass"} == shipped
    assert all(r["reviewer"] and r["reviewer"] != r["writer"] for r in rows)
    first = next(i for i, r in enumerate(rows) if r["id"] in shipped)
    edited = tmp_path / "seeds.jsonl"
    changed = [
        {**s, "abstract_reversal": "Something else entirely, please."} if s["id"] == rows[first]["id"] else s
        for s in seeds
    ]
    edited.write_text("".join(json.dumps(s) + "\n" for s in changed))
    assert bundle.validate_bundle(edited) == [
        f"{ABSTRACT_AUDIT_PATH}:{first + 1}: {rows[first]['id']}: the abstract reversal changed after its review"
    ]


def test_every_borrowed_hard_negative_has_a_reviewed_keep(tmp_path):
    from ifir_lib.core.config import NEGATIVE_AUDIT_PATH
    from ifir_lib.seeds.negative_audit import borrowed

    seeds = seed_io.load_seeds()
    rows = [json.loads(line) for line in NEGATIVE_AUDIT_PATH.read_text().splitlines()]
    carried = {(s["id"], h["id"]) for s in seeds for h in borrowed(s)}
    keep = {(r["seed"], r["hn"]) for r in rows if r["verdict"] == "keep" and r["reviewers"]}
    assert carried <= keep and all(r["verdict"] in ("keep", "drop") for r in rows)
    dropped = next(r for r in rows if r["verdict"] == "drop" and r.get("origin") == "original")
    seed = next(s for s in seeds if s["id"] == dropped["seed"])
    assert dropped["hn"] not in {h["id"] for h in seed["hard_negatives"]}
    counts = bundle.data_stats()["hard_negative_audit"]
    assert counts["borrowed_screened"] >= 2700 and counts["dropped"] > 0


def test_stats_measure_the_surface_cues_of_each_view():
    cues = bundle.data_stats()["cues"]
    views = cues["seeds"]["views"]
    assert set(views) == {"instruction", "reference_reversal", "abstract_reversal", "aug_instruction"}
    # the abstract style's I' is not solved by word overlap more often than I is
    assert views["abstract_reversal"]["overlap_picks_right"] <= views["instruction"]["overlap_picks_right"]
    assert (
        views["abstract_reversal"]["copies_4gram_of_right"]
        < views["reference_reversal"]["copies_4gram_of_right"]
    )
    assert set(cues["eval"]) >= {"v1", "v2"} and set(cues["eval"]["v2"]) == {"og", "changed"}
