"""Near-dedup quality, speed and memory: this project against datasketch's MinHashLSH.

For each corpus size, benchmarks/corpus.py writes a labeled corpus (cached under --work); the
project's ingest and normalize stages turn it into records; exact dedup keeps one text per
``dedup_key`` (the earliest record, as the pipeline does). Both tools then cluster those distinct
texts, which is the near-dedup problem proper (exact copies would only inflate both scores):

  etl_project        etl_project.near_dedup.near_duplicates with its default NearConfig
  datasketch         the same tokens and shingles (our token_text, k-word shingles as UTF-8),
                     MinHash.bulk (sha1, the same number of permutations), MinHashLSH with the
                     same threshold (its own optimal bands x rows), every candidate pair merged,
                     clusters by union-find: the tool as it is usually used
  datasketch+verify  this project's algorithm written with datasketch: the same bands x rows,
                     candidates kept only if their exact Jaccard (Python sets) reaches the
                     threshold (no chain guard): equal quality, so the speed ratio is the
                     implementation's

Quality is pair precision / recall / F1 over distinct texts: a pair is positive when both texts
carry the same true cluster in labels.csv, predicted when both land in the same cluster.
Speed is distinct texts per second of wall time from texts in memory to clusters (tokenizing
included for every tool). Memory is the peak resident set of a fresh worker process during that
step, above its resident set just before (peak reset through /proc/self/clear_refs).
Every figure is the median over --repeats runs; the runs of the tools are interleaved so that a
noisy machine slows them alike.

    python benchmarks/near_dedup_bench.py --sizes 10000 100000 --repeats 3 --work /tmp/near-bench
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

TOOLS = ("etl_project", "datasketch", "datasketch+verify")


# --- input ----------------------------------------------------------------------------------

def prepare(work: Path, records: int, seed: int) -> Path:
    """Corpus files, then distinct texts with their true cluster (cached as Parquet)."""
    import corpus

    from etl_project import ingest, normalize

    texts_path = work / f"texts-{records}.parquet"
    if texts_path.exists():
        return texts_path
    folder = work / f"corpus-{records}"
    if not (folder / corpus.LABELS_FILE).exists():
        corpus.generate(folder, records, max(1, records // 200), seed)
    labels = pl.read_csv(folder / corpus.LABELS_FILE, schema_overrides={"parent": pl.Int64})
    files = ingest.read_landing_folder(folder, 1 << 30)
    parsed = ingest.parse_files(files, 1 << 20)
    recs = normalize.normalize_records(parsed.raw_records).join(labels, on=["source_file", "ordinal"])
    if recs.height != records:
        raise SystemExit(f"expected {records} records with labels, got {recs.height}")
    distinct = (
        recs.sort("source_file", "ordinal")
        .group_by("dedup_key", maintain_order=True)
        .agg(cluster=pl.col("cluster").first(), clusters=pl.col("cluster").n_unique())
    )
    conflicts = distinct.filter(pl.col("clusters") > 1).height
    if conflicts:
        print(f"  note: {conflicts} dedup keys carry records of several true clusters", file=sys.stderr)
    distinct.select("dedup_key", "cluster").write_parquet(texts_path)
    return texts_path


# --- workers (one fresh process per run) ----------------------------------------------------

def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(field)


def run_project(texts: pl.Series):
    from etl_project import near_dedup

    merged = near_dedup.near_duplicates(texts, near_dedup.NearConfig())
    return merged["index"].to_numpy(), merged["canonical"].to_numpy()


def _datasketch_shingles(texts: pl.Series, config) -> list[list[bytes]]:
    from etl_project import near_dedup

    token_lists = (
        texts.to_frame("t")
        .select(near_dedup.token_text(pl.col("t")).str.replace_all(r"[^a-z0-9\x{80}-\x{10FFFF}]+", " ").str.strip_chars().str.split(" "))
        .to_series()
        .to_list()
    )
    k = config.shingle_size
    return [
        [" ".join(tokens[i: i + k]).encode("utf-8") for i in range(len(tokens) - k + 1)]
        if len(tokens) >= config.min_words else []
        for tokens in token_lists
    ]


def run_datasketch(texts: pl.Series, verify: bool):
    import numpy as np
    from datasketch import MinHash, MinHashLSH

    from etl_project.near_dedup import NearConfig

    config = NearConfig()
    shingle_lists = _datasketch_shingles(texts, config)
    eligible = [i for i, s in enumerate(shingle_lists) if s]
    sketches = MinHash.bulk([shingle_lists[i] for i in eligible], num_perm=config.permutations)
    params = (config.bands, config.rows) if verify else None  # None: datasketch picks for the threshold
    lsh = MinHashLSH(threshold=config.threshold, num_perm=config.permutations, params=params)
    with lsh.insertion_session() as session:
        for i, sketch in zip(eligible, sketches):
            session.insert(i, sketch)
    parent = list(range(len(shingle_lists)))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    sets = {}
    for i, sketch in zip(eligible, sketches):
        for j in lsh.query(sketch):
            if j <= i:
                continue
            if verify:
                a = sets.get(i) or sets.setdefault(i, set(shingle_lists[i]))
                b = sets.get(j) or sets.setdefault(j, set(shingle_lists[j]))
                if len(a & b) / len(a | b) < config.threshold:
                    continue
            ri, rj = find(i), find(j)
            if ri != rj:
                parent[max(ri, rj)] = min(ri, rj)  # root = earliest text, as in the project
    roots = np.array([find(i) for i in range(len(parent))])
    merged = np.flatnonzero(roots != np.arange(len(roots)))
    print(json.dumps({"lsh_bands_rows": [lsh.b, lsh.r]}), file=sys.stderr)
    return merged, roots[merged]


def worker(tool: str, texts_path: Path, out: Path) -> None:
    texts = pl.read_parquet(texts_path)["dedup_key"]
    if tool == "etl_project":
        import etl_project.near_dedup  # noqa: F401  (imports are not part of the measure)
    else:
        import datasketch  # noqa: F401
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak RSS (VmHWM) to the current RSS
    before = _rss_kib("VmRSS")
    started = time.perf_counter()
    if tool == "etl_project":
        index, canonical = run_project(texts)
    else:
        index, canonical = run_datasketch(texts, verify=tool == "datasketch+verify")
    seconds = time.perf_counter() - started
    peak = _rss_kib("VmHWM")
    pl.DataFrame({"index": index, "canonical": canonical}, schema={"index": pl.Int64, "canonical": pl.Int64}).write_parquet(out)
    print(json.dumps({"seconds": seconds, "peak_mib": (peak - before) / 1024, "rss_mib": peak / 1024}))


# --- scoring --------------------------------------------------------------------------------

def pair_scores(truth: pl.Series, merged: pl.DataFrame) -> dict:
    """Pair precision, recall and F1 of a clustering given as (index, canonical) merges."""
    n = len(truth)
    predicted = (
        pl.DataFrame({"index": range(n)}, schema={"index": pl.Int64})
        .join(merged, on="index", how="left")
        .select(pl.col("canonical").fill_null(pl.col("index")), truth=truth)
    )

    def pairs(column: pl.Expr) -> pl.Expr:
        return (column * (column - 1) // 2).sum()

    true_pairs = predicted.group_by("truth").len().select(pairs(pl.col("len").cast(pl.Int64))).item()
    found = predicted.group_by("canonical").len().select(pairs(pl.col("len").cast(pl.Int64))).item()
    hits = predicted.group_by("canonical", "truth").len().select(pairs(pl.col("len").cast(pl.Int64))).item()
    precision = hits / found if found else 1.0
    recall = hits / true_pairs if true_pairs else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "true_pairs": true_pairs, "predicted_pairs": found}


def measure(tool: str, texts_path: Path, work: Path) -> dict:
    out = work / f"pred-{tool}-{texts_path.stem}.parquet"
    done = subprocess.run(
        [sys.executable, __file__, "--worker", tool, str(texts_path), str(out)],
        capture_output=True, text=True, check=False,
    )
    if done.returncode:
        raise SystemExit(f"{tool} worker failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    extra = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    for item in extra:
        result.update(item)
    result["merged"] = pl.read_parquet(out)
    return result


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tools", nargs="+", default=list(TOOLS), choices=TOOLS)
    parser.add_argument("--work", type=Path, default=Path("/tmp/near-dedup-bench"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--worker", nargs=3, metavar=("TOOL", "TEXTS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker[0], Path(args.worker[1]), Path(args.worker[2]))
        return
    args.work.mkdir(parents=True, exist_ok=True)
    header = f"{'records':>8} {'texts':>8} {'tool':<18} {'precision':>9} {'recall':>7} {'F1':>6} {'texts/s':>9} {'seconds':>8} {'peak MiB':>9}"
    rows = []
    print(header, flush=True)
    for size in args.sizes:
        texts_path = prepare(args.work, size, args.seed)
        truth = pl.read_parquet(texts_path)["cluster"]
        runs_of = {tool: [] for tool in args.tools}
        for _ in range(args.repeats):
            for tool in args.tools:
                runs_of[tool].append(measure(tool, texts_path, args.work))
        for tool, runs in runs_of.items():
            scores = pair_scores(truth, runs[0]["merged"])  # the clusters are the same on every run
            seconds = statistics.median(r["seconds"] for r in runs)
            peak = statistics.median(r["peak_mib"] for r in runs)
            rows.append((size, len(truth), tool, scores, seconds, peak, runs[0].get("lsh_bands_rows")))
            line = (f"{size:>8} {len(truth):>8} {tool:<18} {scores['precision']:>9.4f} {scores['recall']:>7.4f} "
                    f"{scores['f1']:>6.4f} {len(truth) / seconds:>9,.0f} {seconds:>8.2f} {peak:>9.1f}")
            if runs[0].get("lsh_bands_rows"):
                line += f"  (LSH bands x rows {runs[0]['lsh_bands_rows']})"
            print(line, flush=True)
    print()
    for size in args.sizes:
        ours = next((r for r in rows if r[0] == size and r[2] == "etl_project"), None)
        for other in (r for r in rows if r[0] == size and r[2] != "etl_project"):
            if ours:
                print(f"{size:>8} records: etl_project is {other[4] / ours[4]:.1f}x the throughput of {other[2]} "
                      f"(F1 {ours[3]['f1']:.4f} vs {other[3]['f1']:.4f})")


if __name__ == "__main__":
    main()
