"""A corpus of short one-line records with heavy exact duplication, in the seeds' file format.

Issue 14's second workload: ~800k records of ~60 bytes in 16 files (~50 MB), the shape of a dump
of titles, log lines or messages rather than abstracts. The text is real: each distinct record is
a run of consecutive words cut from the bundled seeds' abstracts (real ICML abstracts), so word
frequencies, punctuation, LaTeX and Unicode are those of real text. Popularity is skewed (a few
records repeat thousands of times, most a handful of times), and a share of the copies differ
only in case or spacing, which normalization folds into the same paper.

    python benchmarks/short_corpus.py --records 800000 --files 16 --out DIR [--distinct-share 0.15] [--seed 1]

Deterministic for a given seed and seeds folder.
"""

import argparse
import random
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEEDS = HERE.parent / "seeds"
PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
TARGET_BYTES = 60


def seed_words(seeds: Path = SEEDS) -> list[list[str]]:
    """The words of every abstract in the seeds (paragraphs after each file's title line)."""
    abstracts = []
    for path in sorted(seeds.glob("*.txt")):
        paragraphs = PARAGRAPH_BREAK.split(path.read_text(encoding="utf-8"))
        abstracts += [p.split() for p in paragraphs[1:] if len(p.split()) >= 4]
    return abstracts


def distinct_records(count: int, rng: random.Random, abstracts: list[list[str]]) -> list[str]:
    """``count`` different runs of consecutive words of about TARGET_BYTES bytes each."""
    seen: set[str] = set()
    records: list[str] = []
    while len(records) < count:
        words = rng.choice(abstracts)
        start = rng.randrange(len(words))
        target = rng.randint(TARGET_BYTES // 2, TARGET_BYTES * 3 // 2)
        picked, size = [], 0
        for word in words[start:]:
            picked.append(word)
            size += len(word.encode("utf-8")) + 1
            if size >= target:
                break
        text = " ".join(picked)
        # The seeds hold a few thousand word runs; a numbered suffix (as in a log line or a
        # versioned title) keeps the distinct records distinct past that.
        if text in seen:
            text = f"{text} #{len(records)}"
        seen.add(text)
        records.append(text)
    return records


def variant(text: str, rng: random.Random) -> str:
    """A copy as a dump would hold it: mostly verbatim, sometimes re-cased or re-spaced."""
    roll = rng.random()
    if roll < 0.85:
        return text
    if roll < 0.93:
        return text.upper() if rng.random() < 0.3 else text.lower()
    return "  ".join(text.split(" ")) + " "


def generate(out: Path, records: int, files: int, seed: int, distinct_share: float = 0.15) -> dict:
    """Write ``files`` landing files holding ``records`` records; return the counts."""
    rng = random.Random(seed)
    pool = distinct_records(max(1, int(records * distinct_share)), rng, seed_words())
    # Every distinct record appears at least once; the other copies are drawn with a skewed
    # popularity (index ~ u**3 puts most of them on the first records of the pool); then shuffled
    # so that every file holds both.
    picks = list(range(min(len(pool), records)))
    picks += [int(len(pool) * rng.random() ** 3) for _ in range(records - len(picks))]
    rng.shuffle(picks)
    out.mkdir(parents=True, exist_ok=True)
    per_file = -(-records // files)
    written = 0
    for index in range(files):
        lines = [variant(pool[pick], rng) for pick in picks[written:written + per_file]]
        body = f"Short records, part {index + 1}\n\n" + "\n\n".join(lines) + "\n"
        (out / f"short_{index:03d}.txt").write_text(body, encoding="utf-8")
        written += len(lines)
    return {"records": written, "distinct": len(pool), "files": files}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=800_000)
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--distinct-share", type=float, default=0.15, help="distinct records / records")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    counts = generate(args.out, args.records, args.files, args.seed, args.distinct_share)
    print(counts, file=sys.stderr)


if __name__ == "__main__":
    main()
