"""What a run costs after a small change, against the full build of the same warehouse (issue 15).

    python benchmarks/incremental_bench.py [--records 1000000] [--repeats 3] [--work DIR] [--corpus-dir DIR]

Builds a warehouse from a corpus (pipeline_bench's: corpus.py, seed 1, ~100 records per file,
generated once) with `etl-project run` and a DAGSTER_HOME of its own, then, ``--repeats`` times,
changes the landing folder and times `etl-project run` after each change:

  add      a new file of 1,000 records: half exact copies of published records, half new texts
  change   an existing file with one paragraph replaced by a new text
  remove   an existing file deleted
  nothing  no change at all

and Dagster's floor of the same graph (do-nothing assets and checks, pipeline_bench
--dagster-floor). Every run is a child process: wall time around it, peak RSS of its largest
process (wait4) and the peak of its process tree's summed PSS. Printed: the full build, then per
change the median wall time, its share of the full build, and the peaks; ``nothing`` also as a
multiple of Dagster's floor. The goals of issue 15: add, change and remove at most 5% of the full
build each, nothing at most 1.5x the floor, every peak under 1 GB.
"""

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpus
import pipeline_bench as bench

CHANGES = ("add", "change", "remove", "nothing")
ADDED_RECORDS = 1_000
NEW_TEXT_SEED = 99  # a corpus seed other than the warehouse's: texts it never saw
NEW_TEXTS = 10_000  # enough for the added files and changed paragraphs of up to 9 repeats


def paragraphs(path: Path) -> tuple[str, list[str]]:
    title, *records = [p for p in path.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    return title, records


def new_texts(work: Path) -> list[str]:
    """NEW_TEXTS abstracts from a corpus of another seed, generated once."""
    folder = work / f"new_texts_{NEW_TEXTS}"
    if not (folder / corpus.LABELS_FILE).exists():
        shutil.rmtree(folder, ignore_errors=True)
        corpus.generate(folder, NEW_TEXTS, 1, NEW_TEXT_SEED)
    [path] = [p for p in folder.iterdir() if p.suffix == ".txt"]
    return paragraphs(path)[1]


def make_change(change: int, kind: str, landing: Path, work: Path) -> None:
    """Apply change number ``change`` of ``kind`` to the landing folder."""
    files = sorted(p for p in landing.iterdir() if p.suffix == ".txt" and not p.name.startswith("zz_"))
    pool = new_texts(work)
    if kind == "add":
        copies = [text for path in files[:20] for text in paragraphs(path)[1]][: ADDED_RECORDS // 2]
        fresh = pool[ADDED_RECORDS * change:][: ADDED_RECORDS - len(copies)]
        text = "\n\n".join([f"Added paper list {change}", *copies, *fresh]) + "\n"
        (landing / f"zz_added_{change:03d}.txt").write_text(text, encoding="utf-8")
    elif kind == "change":
        path = files[len(files) // 3 + change]
        title, records = paragraphs(path)
        records[len(records) // 2] = pool[-1 - change]
        path.write_text("\n\n".join([title, *records]) + "\n", encoding="utf-8")
    elif kind == "remove":
        files[2 * len(files) // 3 + change].unlink()


def cli_run(landing: Path, warehouse: Path, home: Path) -> dict:
    return bench.run_child(bench.etl_project_command() + ["run", "--seeds", landing, "--warehouse", warehouse],
                           bench.child_env(DAGSTER_HOME=str(home)))


def dagster_floor(work: Path) -> dict:
    shape = json.loads(bench.run_child([sys.executable, HERE / "pipeline_bench.py", "--graph-shape"])["stdout"])
    path = work / "graph_shape.json"
    path.write_text(json.dumps(shape))
    return bench.run_child([sys.executable, HERE / "pipeline_bench.py", "--dagster-floor", path])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000, help="records in the corpus of the full build")
    parser.add_argument("--repeats", type=int, default=3, help="changes of each kind (medians printed)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/etl_incremental_bench"), help="corpora and outputs")
    parser.add_argument("--corpus-dir", type=Path, help="reuse DIR/c<records> as the corpus when it exists")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    source = bench.corpus_landing(args.records, args.work, args.corpus_dir)
    landing, warehouse, home = args.work / "landing", args.work / "warehouse", args.work / "dagster_home"
    for folder in (landing, warehouse, home):
        shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(source, landing)  # the changes must not touch the corpus
    home.mkdir()

    print(f"full build of {args.records:,} records ...", file=sys.stderr, flush=True)
    full = cli_run(landing, warehouse, home)
    runs: dict[str, list[dict]] = {kind: [] for kind in CHANGES}
    for change in range(args.repeats):
        for kind in CHANGES:
            make_change(change, kind, landing, args.work)
            print(f"{kind} {change + 1}/{args.repeats} ...", file=sys.stderr, flush=True)
            runs[kind].append(cli_run(landing, warehouse, home))
    floor = [dagster_floor(args.work) for _ in range(args.repeats)]
    floor_wall = statistics.median(r["wall"] for r in floor)

    def peak(rs: list[dict], key: str) -> float:
        return max(r[key] or 0.0 for r in rs)

    rows = [["full build", bench.fmt(full["wall"], 1), "100%", "", bench.fmt(full["rss_mb"], 0), bench.fmt(full["tree_mb"] or 0, 0)]]
    for kind, rs in runs.items():
        wall = statistics.median(r["wall"] for r in rs)
        rows.append([kind, bench.fmt(wall, 1), f"{100 * wall / full['wall']:.1f}%",
                     bench.fmt(wall / floor_wall, 2) + "x" if kind == "nothing" else "",
                     bench.fmt(peak(rs, "rss_mb"), 0), bench.fmt(peak(rs, "tree_mb"), 0)])
    rows.append(["Dagster floor", bench.fmt(floor_wall, 1), "", "1.00x", bench.fmt(peak(floor, "rss_mb"), 0), ""])
    print(f"{args.records:,} records, {len(list(source.iterdir())):,} files; medians of {args.repeats} change(s) of each kind")
    print(bench.table(["run", "wall s", "of full build", "of floor", "peak RSS MB", "tree PSS MB"], rows))
    print("last summary line of each kind:")
    for kind, rs in runs.items():
        print(f"  {kind}: {rs[-1]['stdout'].strip().splitlines()[-1]}")


if __name__ == "__main__":
    main()
