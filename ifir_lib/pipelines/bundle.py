"""The bundled data as a whole: statistics (``ifir data stats``) and validation (``ifir data validate``).

Checks what no single row can: unique passage ids across seeds, passage lengths, that every seed
carries what every mode needs, the reversal, abstract-reversal and hard-negative audits,
phrasing-style shares, and that no text is shared between training seeds and the evaluation sets
(compared after Unicode NFKC, casefolding and collapsing whitespace: passages against documents,
also as title + " " + text, and each seed query with its instructions against each evaluation
query with its original and changed instruction).
The bundled seed file is held to all of it (``validate_bundle``); a user's own seed file to its
schema and consistency, and to the audits the user names (``validate_data``, the rule).
Reports the surface cues of every view (``cues``, ``seeds.cues``). Not handled here: one seed's schema
(``seeds``), the evaluation layout and its row-by-row check (``corpora``).
"""

from __future__ import annotations

import collections
import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path

from ..core.config import (
    ABSTRACT_AUDIT_PATH,
    AUDIT_PATH,
    EVAL_SETS,
    FOLLOWIR_DIR,
    NARRATIVE_AUDIT_PATH,
    NEGATIVE_AUDIT_PATH,
    SEEDS_PATH,
)
from ..core.errors import ConfigError
from ..core.jsonl import read_jsonl
from ..core.models import load_model
from ..evaluation.corpora import check_followir, load_followir
from ..seeds.cues import NearCopies, followir_cues, model_cues, seed_cues
from ..seeds.negative_audit import audit_counts, check_negative_audit, text_sha256
from ..seeds.schema import (
    INSTRUCTION_TYPES,
    NARRATIVE_FIELDS,
    REVERSAL_AUDITED_FIELDS,
    load_seeds,
    normalized_text,
    passage_fields,
    passage_text_clashes,
    read_seeds,
)
from ..synthesis.checks import phrasing_style

_WORD = re.compile(r"\S+")


def passages_of(seed: dict) -> Iterable[dict]:
    yield seed["positive"]
    yield from seed["instruction_negatives"]
    yield from seed["hard_negatives"]


MAX_STYLE_SHARE = 0.40  # no single phrasing style may exceed this share of reversals


def style_shares(texts: Iterable[str]) -> dict[str, float]:
    """``{style: share}`` by ``reversal_checks.phrasing_style``, rounded to 3 decimals, largest first."""
    c = collections.Counter(phrasing_style(t) for t in texts)
    n = sum(c.values()) or 1
    return {k: round(v / n, 3) for k, v in c.most_common()}


def data_stats(
    seeds_path: str | Path = SEEDS_PATH,
    followir_dir: str | Path = FOLLOWIR_DIR,
    negative_audit_path: str | Path | None = NEGATIVE_AUDIT_PATH,
    cues_model: str | None = None,
) -> dict:
    """Counts for ``ifir data stats``: seeds, types, domains, passages, eval queries and docs, the
    hard-negative audit's counts, and ``cues``: each view's surface cues on the seeds and the same
    overlap share on every evaluation set (``seeds.cues``); with ``cues_model``, also how often
    that untrained embedder ranks each view's right document above the wrong one."""
    seeds = load_seeds(seeds_path)
    ev = load_followir(followir_dir)
    sets = {name: folder for name, folder in EVAL_SETS.items() if Path(folder).exists()}
    evs = {
        name: ev if Path(folder) == Path(followir_dir) else load_followir(folder)
        for name, folder in sets.items()
    }
    if Path(followir_dir) not in map(Path, sets.values()):
        evs[Path(followir_dir).name] = ev
    words = [len(_WORD.findall(p["text"])) for s in seeds for p in passages_of(s)]
    return {
        "seeds": len(seeds),
        "instruction_types": dict(sorted(collections.Counter(s["instruction_type"] for s in seeds).items())),
        "domains": dict(sorted(collections.Counter(s.get("domain", "unknown") for s in seeds).items())),
        "passages": len(words),
        "passage_words": {"min": min(words), "mean": round(sum(words) / len(words), 1), "max": max(words)},
        "instruction_negatives": sum(len(s["instruction_negatives"]) for s in seeds),
        "with_reference_reversal": sum(1 for s in seeds if s.get("reference_reversal")),
        "with_narratives": sum(1 for s in seeds if s.get("narrative")),
        "counterparts": len(seeds),
        "eval_queries": len(ev.queries),
        "eval_documents": len(ev.corpus),
        "eval_changed_documents": sum(len(v) for v in ev.qrel_diff.values()),
        "eval_min_pool": min(len(v) for v in ev.top_ranked.values()),
        "reversal_styles": style_shares(
            s["reference_reversal"] for s in seeds if s.get("reference_reversal")
        ),
        "instruction_styles": style_shares(s["instruction"] for s in seeds),
        "with_abstract_reversal": sum(1 for s in seeds if s.get("abstract_reversal")),
        "eval_sets": {name: len(evs[name].queries) for name in sets},
        "hard_negative_audit": (
            audit_counts(negative_audit_path)
            if negative_audit_path and Path(negative_audit_path).exists()
            else None
        ),
        "cues": {
            "seeds": seed_cues(seeds),
            "eval": {name: followir_cues(e) for name, e in evs.items()},
            **({"model": {"name": cues_model, **_model_cues(seeds, cues_model)}} if cues_model else {}),
        },
    }


def _model_cues(seeds: list[dict], name: str) -> dict:
    model = load_model(name)
    return model_cues(seeds, lambda texts: model.encode(texts, batch_size=64, normalize_embeddings=True))


AUDITS = {  # the release's verdict files, by the kind ``ifir data validate --audit KIND=FILE`` names
    "reversal": AUDIT_PATH,
    "narrative": NARRATIVE_AUDIT_PATH,
    "abstract": ABSTRACT_AUDIT_PATH,
    "negative": NEGATIVE_AUDIT_PATH,
}


def is_bundled(seeds_path: str | Path) -> bool:
    """True when ``seeds_path`` is the bundled release's seed file (``config.SEEDS_PATH``)."""
    return Path(seeds_path).resolve() == Path(SEEDS_PATH).resolve()


def validate_data(
    seeds_path: str | Path = SEEDS_PATH,
    followir_dir: str | Path | None = None,
    audits: dict[str, str | Path] | None = None,
) -> list[str]:
    """``ifir data validate``: the problems of a seed file and evaluation folders, and notes
    (``corpora.Kept``: rows scored as they stand, not problems); valid when every line is a note.

    The rule: the bundled seed file (``is_bundled``) is held to the release's checks
    (``validate_bundle``), its four audit files included. Any other seed file, a user's own, gets
    the schema of the synthesis and training stages (``id``, ``query``, ``instruction``,
    ``positive``, ``instruction_negatives``; every other field it has is checked too), unique seed
    ids, one text per passage id and no passage in two roles of one seed; and the audits named in
    ``audits`` (``{kind: file}``, kinds of ``AUDITS``), none by default. Either way every
    evaluation folder is checked row by row (``corpora.check_followir``) and against the seeds
    (no shared text or id, ``_eval_problems``); ``followir_dir`` defaults to every set in
    ``config.EVAL_SETS``.
    A malformed row raises ``DataError`` naming file, line and field; other problems are listed,
    each naming file, line and field where it has them.
    """
    if unknown := sorted(set(audits or {}) - set(AUDITS)):
        raise ConfigError(f"unknown audit kind {unknown[0]!r}; choose from {', '.join(AUDITS)}")
    release = is_bundled(seeds_path)
    audits = {**(AUDITS if release else {}), **(audits or {})}
    return _validate(seeds_path, followir_dir, audits, release)


def validate_bundle(
    seeds_path: str | Path = SEEDS_PATH,
    followir_dir: str | Path | None = None,
    min_words: int = 40,
    max_words: int = 120,
    audit_path: str | Path | None = AUDIT_PATH,
    narrative_audit_path: str | Path | None = NARRATIVE_AUDIT_PATH,
    negative_audit_path: str | Path | None = NEGATIVE_AUDIT_PATH,
    abstract_audit_path: str | Path | None = ABSTRACT_AUDIT_PATH,
) -> list[str]:
    """The bundled release's checks on ``seeds_path`` (any file: tests run them on edited copies
    of the bundle); a list of problems, empty means valid. ``None`` skips one audit.

    Checks what ``validate_data`` checks for every file, and the release's own rules: the full
    seed schema, at least 3 hard negatives, a reference reversal and one of the 11 instruction
    types per seed (what every mode needs); each positive and instruction negative owned by one
    seed (mined hard negatives reuse other seeds' passages by id); passages of ``min_words`` to
    ``max_words`` words; no phrasing style above ``MAX_STYLE_SHARE`` of the reversals; and the
    audits: the reversal audit covers every seed with a passing verdict and the same target
    negative; every seed with narratives has a passing narrative verdict for exactly its text
    (``narratives_sha256``), and every abstract reversal one for its text; every borrowed hard
    negative has a ``keep`` row in the hard-negative audit for exactly its text
    (``seeds.negative_audit``).
    """
    given = {
        "reversal": audit_path,
        "narrative": narrative_audit_path,
        "abstract": abstract_audit_path,
        "negative": negative_audit_path,
    }
    audits = {kind: path for kind, path in given.items() if path is not None}
    return _validate(seeds_path, followir_dir, audits, release=True, words=(min_words, max_words))


def _validate(seeds_path, followir_dir, audits: dict, release: bool, words=(40, 120)) -> list[str]:
    """``validate_data`` and ``validate_bundle``: the release's rules when ``release``, the audits
    in ``audits`` (``{kind: file}``), and the checks every file gets."""
    # raises on the first bad row; passage ids with two texts are listed, all of them, below
    numbered = read_seeds(seeds_path, stage="bundle" if release else "train", check_passage_texts=False)
    seeds = [s for _, s in numbered]
    problems = _passage_problems(numbered, seeds_path)
    if release:
        problems += _release_problems(numbered, seeds_path, words)
    checks = {
        "reversal": _check_audit,
        "narrative": _check_narrative_audit,
        "abstract": _check_abstract_audit,
        "negative": check_negative_audit,
    }
    problems += [p for kind in AUDITS if kind in audits for p in checks[kind](seeds, audits[kind])]
    folders = (
        [followir_dir] if followir_dir is not None else [f for f in EVAL_SETS.values() if Path(f).exists()]
    )
    return problems + [p for folder in folders for p in _eval_problems(seeds, folder)]


def _fields(seed: dict) -> Iterable[tuple[str, dict]]:
    """``passages_of`` with each passage's field: ``('instruction_negatives[1]', {...})``."""
    return passage_fields(seed, counterparts=False)


def _passage_problems(numbered: list[tuple[int, dict]], path) -> list[str]:
    """Any seed file: one text per passage id across the file (``seeds.schema.passage_text_clashes``,
    the check ``load_seeds`` raises on), and no passage id in two roles of one seed (a positive
    that is also its negative). Each problem names file, line and field."""
    problems = [(e.line, str(e)) for e in passage_text_clashes(numbered, path)]
    for n, s in numbered:
        role: dict[str, str] = {}
        for fld, p in _fields(s):
            if p["id"] in role:
                problems.append(
                    (n, f"{path}:{n}: field '{fld}': passage id {p['id']!r} is also {role[p['id']]}")
                )
            role.setdefault(p["id"], fld)
    return [p for _, p in sorted(problems, key=lambda x: x[0])]  # in file order, as before


def _release_problems(numbered: list[tuple[int, dict]], path, words: tuple[int, int]) -> list[str]:
    """The bundled release's own rules (``validate_bundle``), each problem naming line and field."""
    (lo, hi), problems = words, []
    owner: dict[str, tuple[str, int]] = {}
    measured: set[str] = set()
    for n, s in numbered:
        where = f"{path}:{n}: field"
        if len(s["hard_negatives"]) < 3:
            problems.append(
                f"{where} 'hard_negatives': {len(s['hard_negatives'])} passages (the release needs 3+)"
            )
        if not s.get("reference_reversal"):
            problems.append(f"{where} 'reference_reversal': missing (the release needs one per seed)")
        if s["instruction_type"] not in INSTRUCTION_TYPES:
            problems.append(
                f"{where} 'instruction_type': {s['instruction_type']!r} is not one of {', '.join(INSTRUCTION_TYPES)}"
            )
        for fld, p in _fields(s):
            if not fld.startswith("hard_negatives"):
                if p["id"] in owner:
                    problems.append(
                        f"{where} '{fld}': passage id {p['id']!r} also belongs to {owner[p['id']][0]} "
                        f"(line {owner[p['id']][1]})"
                    )
                owner[p["id"]] = (s["id"], n)
            if p["id"] not in measured:
                measured.add(p["id"])
                k = len(_WORD.findall(p["text"]))
                if not lo <= k <= hi:
                    problems.append(f"{where} '{fld}': passage {p['id']!r} has {k} words (want {lo}-{hi})")
    shares = style_shares(s["reference_reversal"] for _, s in numbered if s.get("reference_reversal"))
    return problems + [
        f"{path}: reversal style {k!r} is {v:.1%} of reversals (max {MAX_STYLE_SHARE:.0%})"
        for k, v in shares.items()
        if v > MAX_STYLE_SHARE
    ]


# what a seed trains on with its query: every instruction form a mode may pair it with
INSTRUCTION_FORMS = (
    "instruction",
    "reference_reversal",
    "aug_instruction",
    "abstract_reversal",
    *NARRATIVE_FIELDS,
)


def _trained_on(seeds: list[dict]) -> tuple[set[str], set[str], dict[str, str]]:
    """What the seeds train on, for ``_eval_problems``: passage ids, normalised passage texts
    (counterpart passages included), and each normalised ``(query, instruction)`` pair (every form
    in ``INSTRUCTION_FORMS``) -> ``"seed 'id' (query + form)"``: a pair, so that a query whose
    words move into the instruction is not taken for another. Hash sets: one pass per file."""
    ids, texts, asked = set(), set(), {}
    for s in seeds:
        for p in _trained_passages(s):
            ids.add(p["id"])
            texts.add(normalized_text(p["text"]))
        for form in INSTRUCTION_FORMS:
            if isinstance(s.get(form), str) and s[form].strip():
                asked.setdefault(
                    (normalized_text(s["query"]), normalized_text(s[form])),
                    f"seed {s['id']!r} (query + {form})",
                )
    return ids, texts, asked


def _trained_passages(seed: dict) -> list[dict]:
    """Every passage ``seed`` trains on: its own (``passages_of``) and its counterpart passages."""
    extra = [seed.get("counterpart_positive"), *(seed.get("counterpart_hard_negatives") or [])]
    return [*passages_of(seed), *(p for p in extra if p)]


def _passage_names(seeds: list[dict]) -> dict[str, str]:
    """``{passage text: "passage 'id' of seed 'id'"}``, the first seed holding each text."""
    out: dict[str, str] = {}
    for s in seeds:
        for p in _trained_passages(s):
            out.setdefault(p["text"], f"passage {p['id']!r} of seed {s['id']!r}")
    return out


def _eval_problems(seeds: list[dict], folder: str | Path) -> list[str]:
    """``check_followir``'s problems for ``folder``, and what it shares with the training seeds (a
    test set must not hold what the model was trained on): a document whose text, or title + " " +
    text, is a seed passage's; a document id that is a passage id; a query whose text with its
    ``instruction_og`` or ``instruction_changed`` is a seed's query with one of its instructions; a
    document sharing half its 8-word spans with a passage (``seeds.cues.NearCopies``: cut to its
    first sentences, or a sentence short or long). Texts are compared after ``normalized_text``
    (Unicode form, case and spacing do not hide a copy)."""
    ids, texts, asked = _trained_on(seeds)
    problems = check_followir(folder)  # raises on a malformed row, so the rows below are well formed
    names = _passage_names(seeds)
    near = NearCopies(list(names))  # cut or padded copies: a passage made from a test document
    path = Path(folder) / "corpus.jsonl"
    for n, doc in read_jsonl(path):
        did, title = str(doc["_id"]), doc.get("title") or ""
        if normalized_text(doc["text"]) in texts:
            problems.append(f"{path}:{n}: field 'text': document {did!r} repeats a training passage")
        elif title.strip() and normalized_text(title + " " + doc["text"]) in texts:
            problems.append(
                f"{path}:{n}: field 'title': document {did!r} as title + ' ' + text repeats a training passage"
            )
        elif hit := near.match(doc["text"]):
            problems.append(
                f"{path}:{n}: field 'text': document {did!r} and training {list(names.values())[hit[0]]} "
                f"share {hit[1]:.0%} of the shorter one's 8-word spans (a near-copy)"
            )
        if did in ids:
            problems.append(f"{path}:{n}: field '_id': document id {did!r} is also a training passage id")
    path = Path(folder) / "queries.jsonl"
    for n, q in read_jsonl(path):
        for fld in ("instruction_og", "instruction_changed"):
            if (q.get(fld) or "").strip() and (
                seed := asked.get((normalized_text(q["text"]), normalized_text(q[fld])))
            ):
                problems.append(
                    f"{path}:{n}: field '{fld}': query {str(q['_id'])!r} with its {fld} repeats "
                    f"training {seed}"
                )
    return problems


def _audited(seeds: list[dict], audit_path: str | Path, ok: tuple[str, ...], ships: str, check) -> list[str]:
    """Problems of ``seeds`` against the verdict file ``audit_path``: a seed without a row, a
    verdict outside ``ok`` while the seed ``ships`` its text, or ``check(seed, row)`` naming one."""
    if not Path(audit_path).exists():
        return [f"{audit_path}: audit file not found"]
    verdicts = {row["id"]: (n, row) for n, row in read_jsonl(audit_path)}
    problems = []
    for s in seeds:
        n, row = verdicts.get(s["id"], (None, None))
        if row is None:
            problems.append(f"{s['id']}: not in the audit file {Path(audit_path).name}")
        elif row.get("verdict") not in ok:
            problems.append(f"{audit_path}:{n}: {s['id']} has verdict {row.get('verdict')!r} but {ships}")
        elif problem := check(s, row):
            problems.append(f"{audit_path}:{n}: {s['id']}{problem}")
    return problems


def reversal_texts_sha256(seed: dict) -> str:
    """The hash a reversal verdict carries: the texts it judged (``REVERSAL_AUDITED_FIELDS``)."""
    texts = [seed.get(f) for f in REVERSAL_AUDITED_FIELDS]
    texts[5] = seed.get("reference_negative_index", 0)
    return hashlib.sha256(json.dumps(texts, sort_keys=True).encode()).hexdigest()


def _check_audit(seeds: list[dict], audit_path: str | Path | None) -> list[str]:
    """Every seed has an audit verdict ``pass`` or ``fixed`` naming the same target negative and
    the same texts (``texts_sha256``: a query, instruction, passage or reversal edited after its
    review no longer passes)."""
    if audit_path is None:
        return []

    def same_texts(s, row):
        if row.get("reference_negative_index") != s.get("reference_negative_index", 0):
            return " audited with another target negative"
        if "texts_sha256" not in row:
            return (
                ": no 'texts_sha256' (the hash of the texts the verdict judged, "
                "ifir_lib.pipelines.bundle.reversal_texts_sha256)"
            )
        if row["texts_sha256"] != reversal_texts_sha256(s):
            changed = "query, instruction, a passage, the reversal or the wording control"
            return f": its {changed} changed after the review"

    return _audited(seeds, audit_path, ("pass", "fixed"), "is in the seeds", same_texts)


def narratives_sha256(seed: dict) -> str:
    """The hash a narrative verdict carries: it covers exactly the three texts that were reviewed."""
    return hashlib.sha256(json.dumps([seed[f] for f in NARRATIVE_FIELDS]).encode()).hexdigest()


def _check_narrative_audit(seeds: list[dict], audit_path: str | Path | None) -> list[str]:
    """Every seed that carries narratives has a ``pass`` verdict for the same texts."""
    with_narratives = [s for s in seeds if s.get("narrative")]
    if audit_path is None or not with_narratives:
        return []

    def same_text(s, row):
        if row.get("narratives_sha256") != narratives_sha256(s):
            return ": the narratives changed after their review"

    return _audited(with_narratives, audit_path, ("pass",), "ships narratives", same_text)


def _check_abstract_audit(seeds: list[dict], audit_path: str | Path | None) -> list[str]:
    """Every seed that carries an abstract reversal has a ``pass`` verdict for exactly its text."""
    with_abstract = [s for s in seeds if s.get("abstract_reversal")]
    if audit_path is None or not with_abstract:
        return []

    def same_text(s, row):
        if row.get("text_sha256") != text_sha256(s["abstract_reversal"]):
            return ": the abstract reversal changed after its review"

    return _audited(with_abstract, audit_path, ("pass",), "ships an abstract reversal", same_text)
