"""The whole pipeline against the DuckDB-only peer, the floor and Dagster's own floor (issue 7).

    python benchmarks/pipeline_bench.py [--sizes 10000 100000 1000000] [--corpus abstracts|short]
        [--repeats N] [--work DIR] [--corpus-dir DIR] [--only VARIANT ...] [--seeds-only] [--json PATH]

Corpora in the seeds' format (``benchmarks/corpus.py``, seed 1, ~100 records per file) are
generated once into ``<work>/corpus_<n>/landing/`` (``labels.csv`` moved next to it, out of the
landing folder) and reused; ``--corpus-dir DIR`` reuses ``DIR/c<n>`` when it exists instead.
``--corpus short`` uses ``benchmarks/short_corpus.py`` instead (seed 1): ~60-byte one-line records
cut from the seeds' real text, heavily duplicated, in 16 files (``<work>/short_<n>/landing/``).

Every variant runs as a child process: wall time is measured around the child and peak RSS is the
child's own ``ru_maxrss`` from ``os.wait4`` (for the core, which resets its high-water mark at
each stage to report per-stage peaks, the highest of those); ``tree PSS`` is the peak of the
summed PSS of the child and its descendants (the cli's Great Expectations worker), sampled every
0.1 s. The output folder is emptied before each run.

  duckdb_peer  the ETL a user would write as one DuckDB SQL script instead of this project:
               read_text, split paragraphs with a regex, normalize with lower/regexp_replace,
               group by a hash of the key, COPY records and papers to zstd Parquet.
  duckdb_peer_tables  the same script keeping records and papers as tables of a DuckDB
               database file too (a warehouse to query, as this project publishes one).
  floor        reading the files and splitting them into paragraphs in Python (read bytes,
               decode UTF-8, one re.split): the least any pipeline must do.
  core_exact   this project's stages in process, exact dedup only, no enrichment
               (benchmarks/pipeline_core.py --exact-only --no-enrich).
  core_full    the same with near duplicates and enrichment (benchmarks/pipeline_core.py).
  cli          `etl-project run` as a whole process, Dagster included, with a fresh DAGSTER_HOME.

Printed: per size and variant wall time, MB/s, records/s, peak RSS and RSS / input size; the
peer's time over the core's; per-stage seconds and microseconds per record of the core (with
the per-record ratio largest/smallest size, to show superlinear stages) and its peak RSS during
each stage; RSS growth per size.
Then, on the bundled seeds: `etl-project run` against Dagster's floor (an in-process
materialization of do-nothing assets and checks shaped like the project's asset graph), and the
import time of ``etl_project.definitions``.

Internal child modes (run by the benchmark itself): ``--peer LANDING OUT``, ``--floor LANDING``,
``--graph-shape``, ``--dagster-floor SHAPE_JSON [--ephemeral]``.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent
SEEDS = PROJECT / "seeds"
VARIANTS = ("duckdb_peer", "duckdb_peer_tables", "floor", "core_exact", "core_full", "cli")
CORE_VARIANTS = ("core_exact", "core_full")
RECORDS_PER_FILE = 100
SHORT_FILES = 16
CORPUS_SEED = 1
MB = 1_000_000
MIN_SEEDS_REPEATS = 3

# The console log level `etl-project run` uses, so the floor does not pay for printing more events.
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
# Blank-line separated paragraphs, as the seeds' format has them (whitespace-only lines count as blank).
PARAGRAPH_BREAK = r"\n[ \t]*\n"

PEER_RECORDS_SQL = """
CREATE {kind} records AS
WITH files AS (
    SELECT filename AS source_file,
           regexp_split_to_array(replace(content, chr(13), ''), '{brk}') AS parts
    FROM read_text({glob})
), paragraphs AS (
    SELECT source_file, unnest(parts) AS raw_text, generate_subscripts(parts, 1) - 1 AS ordinal
    FROM files
), cleaned AS (
    -- ordinal 0 is the title paragraph
    SELECT source_file, ordinal, raw_text, trim(regexp_replace(raw_text, '\\s+', ' ', 'g')) AS text
    FROM paragraphs
    WHERE ordinal > 0 AND trim(raw_text) <> ''
)
SELECT source_file, ordinal, raw_text, text, lower(text) AS dedup_key FROM cleaned
"""
PEER_COPY_RECORDS_SQL = "COPY records TO {path} (FORMAT parquet, COMPRESSION zstd)"
PEER_PAPERS_SQL = """
SELECT hash(dedup_key) AS paper_id,
       arg_min(text, (source_file, ordinal)) AS abstract,
       count(*) AS occurrence_count,
       count(DISTINCT source_file) AS source_count
FROM records
GROUP BY hash(dedup_key)
"""
PEER_COPY_PAPERS_SQL = "COPY ({query}) TO {path} (FORMAT parquet, COMPRESSION zstd)"
PEER_TABLE_PAPERS_SQL = "CREATE TABLE papers AS {query}"
PEER_COPY_TABLE_SQL = "COPY papers TO {path} (FORMAT parquet, COMPRESSION zstd)"


# --- child modes ---------------------------------------------------------------------------------


def _sql_string(value: object) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def peer(landing: Path, out: Path, tables: bool = False) -> dict:
    """The DuckDB-only ETL (variant duckdb_peer; with ``tables``, duckdb_peer_tables, which also
    keeps its tables in ``out/peer.duckdb``), with DuckDB's default threads and memory."""
    import duckdb

    out.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(out / "peer.duckdb") if tables else ":memory:")
    kind = "TABLE" if tables else "TEMP TABLE"
    con.execute(PEER_RECORDS_SQL.format(kind=kind, brk=PARAGRAPH_BREAK, glob=_sql_string(landing / "*.txt")))
    con.execute(PEER_COPY_RECORDS_SQL.format(path=_sql_string(out / "records.parquet")))
    papers_path = _sql_string(out / "papers.parquet")
    if tables:
        con.execute(PEER_TABLE_PAPERS_SQL.format(query=PEER_PAPERS_SQL))
        con.execute(PEER_COPY_TABLE_SQL.format(path=papers_path))
    else:
        con.execute(PEER_COPY_PAPERS_SQL.format(query=PEER_PAPERS_SQL, path=papers_path))
    records = con.execute("SELECT count(*) FROM records").fetchone()[0]
    papers = con.execute(f"SELECT count(*) FROM read_parquet({_sql_string(out / 'papers.parquet')})").fetchone()[0]
    return {"records": records, "papers": papers}


def floor(landing: Path) -> dict:
    """Read, decode and split every file into paragraphs; count the non-blank ones after the title."""
    breaks = re.compile(PARAGRAPH_BREAK)
    records = 0
    for path in sorted(landing.glob("*.txt")):
        paragraphs = breaks.split(path.read_bytes().decode("utf-8"))
        records += sum(1 for p in paragraphs[1:] if p.strip())
    return {"records": records}


def graph_shape() -> dict:
    """The project's asset graph as plain data: one entry per asset node (multi-assets keep their
    specs together) and per asset check, with their dependencies."""
    from etl_project.definitions import defs

    shape: dict[str, list] = {"assets": [], "checks": []}
    for node in defs.resolve_asset_graph().assets_defs:
        for spec in node.check_specs:
            shape["checks"].append({
                "name": spec.name,
                "asset": spec.asset_key.to_user_string(),
                "blocking": spec.blocking,
                "deps": [dep.asset_key.to_user_string() for dep in spec.additional_deps],
            })
        if node.is_executable and not node.check_specs:
            shape["assets"].append({
                "name": node.node_def.name,
                "specs": [
                    {"key": spec.key.to_user_string(), "deps": [dep.asset_key.to_user_string() for dep in spec.deps]}
                    for spec in node.specs
                ],
            })
    return shape


def dagster_floor(shape: dict, ephemeral: bool) -> dict:
    """Materialize, in process, do-nothing assets and checks with the shape's nodes and edges."""
    import dagster as dg

    def noop_assets(node: dict) -> dg.AssetsDefinition:
        specs = [
            dg.AssetSpec(dg.AssetKey.from_user_string(s["key"]), deps=[dg.AssetKey.from_user_string(d) for d in s["deps"]])
            for s in node["specs"]
        ]

        @dg.multi_asset(name=node["name"], specs=specs)
        def _assets():
            for spec in specs:
                yield dg.MaterializeResult(asset_key=spec.key)

        return _assets

    def noop_check(check: dict) -> dg.AssetChecksDefinition:
        @dg.asset_check(
            asset=dg.AssetKey.from_user_string(check["asset"]),
            name=check["name"],
            blocking=check["blocking"],
            additional_deps=[dg.AssetKey.from_user_string(d) for d in check["deps"]],
        )
        def _check() -> dg.AssetCheckResult:
            return dg.AssetCheckResult(passed=True)

        return _check

    definitions = [noop_assets(node) for node in shape["assets"]] + [noop_check(c) for c in shape["checks"]]
    with tempfile.TemporaryDirectory() as home:
        if ephemeral:
            instance = dg.DagsterInstance.ephemeral(tempdir=home)
        else:
            instance = dg.DagsterInstance.local_temp(tempdir=home, overrides={"telemetry": {"enabled": False}})
        with instance:
            result = dg.materialize(definitions, instance=instance, run_config=QUIET_LOGS)
    return {
        "success": result.success,
        "materializations": len(result.get_asset_materialization_events()),
        "checks": len(result.get_asset_check_evaluations()),
    }


# --- measuring children --------------------------------------------------------------------------


def child_env(**extra: str) -> dict[str, str]:
    """The environment of every child: this checkout's code first, no analytics calls."""
    env = dict(os.environ, GX_ANALYTICS_ENABLED="false", **extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT), env.get("PYTHONPATH", "")) if p)
    return env


class TreeMemory:
    """The peak of the summed PSS (proportional set size: shared pages split between the processes
    that share them) of a process and all its descendants, sampled every 0.1 s from /proc.
    wait4's ru_maxrss is the largest single process; a run with a worker process needs the sum."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak_kb = pid, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def stop(self) -> float | None:
        """Stop sampling; the peak in MB (None where /proc has no smaps_rollup)."""
        self._done.set()
        self._thread.join()
        return self.peak_kb * 1024 / MB if self.peak_kb else None

    def _sample(self) -> None:
        while not self._done.wait(0.1):
            self.peak_kb = max(self.peak_kb, sum(map(_pss_kb, _process_tree(self.pid))))

def _process_tree(root: int) -> list[int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:  # the command may contain spaces and parentheses: the fields after the last ')'
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, parent in parents.items() if parent in frontier]
        tree += frontier
    return tree


def _pss_kb(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:  # gone already, or no smaps_rollup on this kernel
        return 0
    match = re.search(r"^Pss:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) if match else 0


def run_child(cmd: list[str], env: dict[str, str] | None = None) -> dict:
    """Run ``cmd``; return its wall seconds, its CPU seconds (user + system), its peak RSS in MB
    (both from wait4: the largest single process of the child and the children it waited for), the
    peak of its process tree's summed PSS in MB (``tree_mb``, sampled) and its stdout.
    A failing child stops the benchmark with its stderr."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen([str(c) for c in cmd], stdout=out, stderr=err, env=env or child_env())
        memory = TreeMemory(proc.pid)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        tree_mb = memory.stop()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        sys.exit(f"FAILED ({proc.returncode}): {' '.join(map(str, cmd))}\n{stderr[-4000:]}\n{stdout[-2000:]}")
    rss_bytes = usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)  # bytes on macOS, KiB on Linux
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mb": rss_bytes / MB, "tree_mb": tree_mb,
            "stdout": stdout}


def etl_project_command() -> list[str]:
    script = Path(sys.executable).with_name("etl-project")
    return [str(script)] if script.exists() else [sys.executable, "-m", "etl_project.cli"]


def parse_cli_summary(stdout: str) -> dict:
    """Records and papers from the summary `etl-project run` prints."""
    if " succeeded " not in stdout.splitlines()[0]:
        sys.exit(f"etl-project run did not succeed:\n{stdout}")
    counts = {}
    for name in ("records", "papers"):
        match = re.search(rf"^{name}:\s+(\d+)", stdout, re.MULTILINE)
        counts[name] = int(match.group(1)) if match else None
    return counts


def run_variant(variant: str, landing: Path, out: Path) -> dict:
    """One run of one variant over ``landing`` into an emptied ``out``: wall, RSS, counts, stages."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    me = [sys.executable, str(Path(__file__).resolve())]
    core = [sys.executable, str(HERE / "pipeline_core.py"), landing, out]
    if variant in ("duckdb_peer", "duckdb_peer_tables"):
        run = run_child(me + ["--peer", landing, out] + (["--peer-tables"] if variant == "duckdb_peer_tables" else []))
        counts = json.loads(run["stdout"])
    elif variant == "floor":
        run = run_child(me + ["--floor", landing])
        counts = json.loads(run["stdout"])
    elif variant in CORE_VARIANTS:
        run = run_child(core + (["--exact-only", "--no-enrich"] if variant == "core_exact" else []))
        result = json.loads(run["stdout"].strip().splitlines()[-1])
        rows = result["rows"]
        counts = {"records": rows.get("raw_records"), "papers": rows.get("papers"), "stages": result["stages"],
                  "stage_rss_mb": result.get("stage_rss_mb", {})}
        # The core resets its high-water mark per stage, which wait4 then reports from the last reset.
        run["rss_mb"] = max(run["rss_mb"], result.get("peak_rss_mb") or 0.0)
    elif variant == "cli":
        home = Path(tempfile.mkdtemp(prefix="dagster_home_", dir=out.parent))
        try:
            run = run_child(etl_project_command() + ["run", "--seeds", landing, "--warehouse", out], child_env(DAGSTER_HOME=str(home)))
        finally:
            shutil.rmtree(home, ignore_errors=True)
        counts = parse_cli_summary(run["stdout"])
    else:
        raise ValueError(variant)
    return {"wall": run["wall"], "cpu": run["cpu"], "rss_mb": run["rss_mb"], "tree_mb": run["tree_mb"], **counts}


def summarize_runs(runs: list[dict]) -> dict:
    """Medians over repeated runs (stages stage by stage); counts from the last run."""
    summary = {key: value for key, value in runs[-1].items()
               if key not in ("wall", "cpu", "rss_mb", "tree_mb", "stages", "stage_rss_mb")}
    summary["wall"] = statistics.median(r["wall"] for r in runs)
    summary["cpu"] = statistics.median(r["cpu"] for r in runs)
    summary["rss_mb"] = statistics.median(r["rss_mb"] for r in runs)
    trees = [r["tree_mb"] for r in runs if r.get("tree_mb")]
    summary["tree_mb"] = statistics.median(trees) if trees else None
    summary["walls"] = [r["wall"] for r in runs]
    if "stages" in runs[-1]:
        names = list(dict.fromkeys(name for r in runs for name in r["stages"]))
        summary["stages"] = {name: statistics.median(r["stages"].get(name, 0.0) for r in runs) for name in names}
        summary["stage_rss_mb"] = {
            name: statistics.median(r["stage_rss_mb"][name] for r in runs if name in r.get("stage_rss_mb", {}))
            for name in names if any(name in r.get("stage_rss_mb", {}) for r in runs)
        }
    return summary


# --- corpora -------------------------------------------------------------------------------------


def corpus_landing(records: int, work: Path, corpus_dir: Path | None, kind: str = "abstracts") -> Path:
    """The landing folder of a corpus of ``records`` records: ``corpus_dir/c<records>`` when it
    exists, else generated once under ``work`` (a stamp file marks a complete corpus)."""
    if kind == "short":
        return short_corpus_landing(records, work)
    if corpus_dir and (corpus_dir / f"c{records}").is_dir():
        return corpus_dir / f"c{records}"
    root = work / f"corpus_{records}"
    landing, stamp = root / "landing", root / "complete"
    if stamp.exists():
        return landing
    shutil.rmtree(root, ignore_errors=True)
    sys.path.insert(0, str(HERE))
    import corpus

    print(f"generating a corpus of {records:,} records in {landing} ...", file=sys.stderr, flush=True)
    corpus.generate(landing, records, max(1, records // RECORDS_PER_FILE), CORPUS_SEED)
    # labels.csv would be ingested as one more landing file
    (landing / corpus.LABELS_FILE).rename(root / corpus.LABELS_FILE)
    stamp.write_text(f"records={records} seed={CORPUS_SEED}\n")
    return landing


def short_corpus_landing(records: int, work: Path) -> Path:
    """The landing folder of a short-record corpus (benchmarks/short_corpus.py), generated once."""
    root = work / f"short_{records}"
    landing, stamp = root / "landing", root / "complete"
    if not stamp.exists():
        shutil.rmtree(root, ignore_errors=True)
        sys.path.insert(0, str(HERE))
        import short_corpus

        print(f"generating a short-record corpus of {records:,} records in {landing} ...", file=sys.stderr, flush=True)
        short_corpus.generate(landing, records, SHORT_FILES, CORPUS_SEED)
        stamp.write_text(f"records={records} files={SHORT_FILES} seed={CORPUS_SEED}\n")
    return landing


def input_bytes(landing: Path) -> int:
    return sum(p.stat().st_size for p in landing.iterdir() if p.is_file())


# --- printing ------------------------------------------------------------------------------------


def table(headers: list[str], rows: list[list]) -> str:
    """A markdown table, numbers right-aligned."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]

    def line(row: list[str]) -> str:
        return "| " + " | ".join(c.rjust(w) for c, w in zip(row, widths)) + " |"

    return "\n".join([line(headers), "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|", *map(line, cells)])


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def size_label(records: int) -> str:
    """1000000 -> 1M, 10000 -> 10k."""
    for unit, suffix in ((1_000_000, "M"), (1000, "k")):
        if records % unit == 0:
            return f"{records // unit}{suffix}"
    return str(records)


def print_variants(results: dict) -> None:
    rows = []
    for n, size in results["sizes"].items():
        mb = size["input_bytes"] / MB
        for variant, r in size["variants"].items():
            rows.append([
                size_label(int(n)), f"{mb:,.1f}", variant, fmt(r["wall"]), fmt(r["cpu"]), fmt(mb / r["wall"], 1),
                fmt(int(n) / r["wall"], 0), fmt(r["rss_mb"], 0), fmt(r["rss_mb"] / mb),
                fmt(r["tree_mb"], 0) if r.get("tree_mb") else "-", r.get("records", "-"), r.get("papers", "-"),
            ])
    print(table(["records", "input MB", "variant", "wall s", "cpu s", "MB/s", "records/s", "peak RSS MB", "RSS/input",
                 "tree PSS MB", "records out", "papers out"], rows))
    print("peak RSS: the largest single process (wait4); tree PSS: all the run's processes together (sampled every 0.1 s)")
    print()
    for n, size in results["sizes"].items():
        v = size["variants"]
        if "duckdb_peer" not in v:
            continue
        ratios = [f"duckdb_peer/{c} = {v['duckdb_peer']['wall'] / v[c]['wall']:.2f}x" for c in CORE_VARIANTS if c in v]
        if "floor" in v:
            ratios.append(f"duckdb_peer/floor = {v['duckdb_peer']['wall'] / v['floor']['wall']:.2f}x")
        print(f"{size_label(int(n))}: speed ratio (> 1: faster than the peer) " + ", ".join(ratios))
    for n, size in results["sizes"].items():
        v = size["variants"]
        for peer_variant in ("duckdb_peer", "duckdb_peer_tables"):
            if peer_variant in v and "cli" in v:
                print(f"{size_label(int(n))}: cli takes {v['cli']['wall'] / v[peer_variant]['wall']:.2f}x the time of {peer_variant}"
                      f" and {v['cli']['rss_mb'] / v[peer_variant]['rss_mb']:.2f}x its peak RSS"
                      + (f" ({v['cli']['tree_mb']:,.0f} MB summed over the run's processes)" if v["cli"].get("tree_mb") else ""))
    print()


def print_stages(results: dict) -> None:
    sizes = list(results["sizes"])
    for variant in CORE_VARIANTS:
        per_size = {n: results["sizes"][n]["variants"].get(variant) for n in sizes}
        per_size = {n: r for n, r in per_size.items() if r}
        if not per_size:
            continue
        names = list(dict.fromkeys(name for r in per_size.values() for name in r["stages"]))
        headers = ["stage"] + [h for n in per_size for h in (f"{size_label(int(n))} s", f"{size_label(int(n))} us/rec")]
        rows = []
        for name in names + ["(startup, other)"]:
            row, per_record = [name], []
            for n, r in per_size.items():
                seconds = r["stages"].get(name) if name in r["stages"] else r["wall"] - sum(r["stages"].values())
                per_record.append(seconds / int(n) * 1e6)
                row += [fmt(seconds), fmt(per_record[-1], 1)]
            if len(per_size) > 1:
                row.append(fmt(per_record[-1] / per_record[0] if per_record[0] else None))
            rows.append(row)
        if len(per_size) > 1:
            headers.append("us/rec largest/smallest")
        print(f"{variant}: seconds and microseconds per record, per stage")
        print(table(headers, rows))
        print()
        rss_rows = [
            [name] + [
                f"{r['stage_rss_mb'][name]:,.0f} ({r['stage_rss_mb'][name] / (results['sizes'][n]['input_bytes'] / MB):.2f}x input)"
                if name in r.get("stage_rss_mb", {}) else "-"
                for n, r in per_size.items()
            ]
            for name in names
        ]
        print(f"{variant}: peak RSS MB during each stage (the process's, so it includes what earlier stages still hold)")
        print(table(["stage"] + [size_label(int(n)) for n in per_size], rss_rows))
        print()


def print_memory(results: dict) -> None:
    sizes = list(results["sizes"])
    variants = list(dict.fromkeys(v for n in sizes for v in results["sizes"][n]["variants"]))
    rows = []
    for variant in variants:
        row, rss = [variant], []
        for n in sizes:
            r = results["sizes"][n]["variants"].get(variant)
            if r:
                rss.append((int(n), r["rss_mb"]))
                row.append(f"{r['rss_mb']:,.0f} ({r['rss_mb'] / (results['sizes'][n]['input_bytes'] / MB):.2f}x input)")
            else:
                row.append("-")
        if len(rss) > 1:
            row.append(f"{rss[-1][1] / rss[0][1]:.1f}x for {rss[-1][0] / rss[0][0]:.0f}x records")
        else:
            row.append("-")
        rows.append(row)
    print("peak RSS MB per size (RSS / input size), and its growth smallest -> largest size")
    print(table(["variant"] + [size_label(int(n)) for n in sizes] + ["growth"], rows))
    print()


def print_seeds(seeds: dict) -> None:
    cli, floor_run = seeds["cli"], seeds["dagster_floor"]
    print(f"bundled seeds ({seeds['input_bytes'] / 1000:.0f} kB; graph: {seeds['assets']} assets in "
          f"{seeds['asset_nodes']} nodes, {seeds['checks']} checks), medians of {seeds['repeats']}:")
    labels = {
        "cli": "etl-project run (fresh DAGSTER_HOME)",
        "dagster_floor": "Dagster floor, temp SQLite instance",
        "dagster_floor_ephemeral": "Dagster floor, ephemeral instance",
        "import": "python -c 'import etl_project.definitions'",
    }
    rows = [[label, fmt(seeds[k]["wall"]), fmt(seeds[k]["cpu"]), fmt(seeds[k]["rss_mb"], 0)] for k, label in labels.items()]
    print(table(["run", "wall s", "cpu s", "peak RSS MB"], rows))
    print(f"etl-project run / Dagster floor (temp SQLite instance) = {cli['wall'] / floor_run['wall']:.2f}x (goal: within 2x)")


# --- the benchmark -------------------------------------------------------------------------------


def bench_sizes(args) -> dict:
    results: dict = {"sizes": {}}
    for n in args.sizes:
        landing = corpus_landing(n, args.work, args.corpus_dir, args.corpus)
        size = {"landing": str(landing), "input_bytes": input_bytes(landing), "variants": {}}
        runs: dict[str, list] = {v: [] for v in args.only}
        for _ in range(args.repeats):  # interleaved, so drift in the machine's load hits every variant
            for variant in args.only:
                print(f"{size_label(n)} {variant} ...", file=sys.stderr, flush=True)
                runs[variant].append(run_variant(variant, landing, args.work / "out" / variant))
        size["variants"] = {v: summarize_runs(r) for v, r in runs.items()}
        results["sizes"][str(n)] = size
    return results


def bench_seeds(args) -> dict:
    repeats = max(MIN_SEEDS_REPEATS, args.repeats)
    shape = json.loads(run_child([sys.executable, Path(__file__).resolve(), "--graph-shape"])["stdout"])
    shape_path = args.work / "graph_shape.json"
    shape_path.write_text(json.dumps(shape))
    runs: dict[str, list] = {"cli": [], "dagster_floor": [], "dagster_floor_ephemeral": [], "import": []}
    for _ in range(repeats):
        print("seeds: cli, Dagster floors, import ...", file=sys.stderr, flush=True)
        runs["cli"].append(run_variant("cli", SEEDS, args.work / "out" / "seeds_cli"))
        for name, extra in (("dagster_floor", []), ("dagster_floor_ephemeral", ["--ephemeral"])):
            run = run_child([sys.executable, Path(__file__).resolve(), "--dagster-floor", shape_path, *extra])
            outcome = json.loads(run["stdout"])
            if not outcome["success"]:
                sys.exit(f"the Dagster floor run failed: {outcome}")
            runs[name].append(run)
        runs["import"].append(run_child([sys.executable, "-c", "import etl_project.definitions"]))
    return {
        "input_bytes": input_bytes(SEEDS),
        "repeats": repeats,
        "asset_nodes": len(shape["assets"]),
        "assets": sum(len(node["specs"]) for node in shape["assets"]),
        "checks": len(shape["checks"]),
        **{name: summarize_runs([{k: r[k] for k in ("wall", "cpu", "rss_mb")} for r in rs]) for name, rs in runs.items()},
    }


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="corpus sizes in records")
    parser.add_argument("--corpus", choices=("abstracts", "short"), default="abstracts",
                        help="~1 KB abstracts (corpus.py) or ~60-byte one-line records in 16 files (short_corpus.py)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per variant and size (medians printed)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/etl_pipeline_bench"), help="corpora and outputs")
    parser.add_argument("--corpus-dir", type=Path, help="reuse DIR/c<records> as the landing folder when it exists")
    parser.add_argument("--only", nargs="+", choices=VARIANTS, default=list(VARIANTS), help="variants to run")
    parser.add_argument("--seeds-only", action="store_true", help="only etl-project run vs Dagster's floor on the seeds")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    # child modes
    parser.add_argument("--peer", nargs=2, type=Path, metavar=("LANDING", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--peer-tables", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--floor", type=Path, metavar="LANDING", help=argparse.SUPPRESS)
    parser.add_argument("--graph-shape", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dagster-floor", type=Path, metavar="SHAPE_JSON", help=argparse.SUPPRESS)
    parser.add_argument("--ephemeral", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.peer:
        print(json.dumps(peer(*args.peer, tables=args.peer_tables)))
    elif args.floor:
        print(json.dumps(floor(args.floor)))
    elif args.graph_shape:
        print(json.dumps(graph_shape()))
    elif args.dagster_floor:
        print(json.dumps(dagster_floor(json.loads(args.dagster_floor.read_text()), args.ephemeral)))
    else:
        args.work = args.work.resolve()
        args.work.mkdir(parents=True, exist_ok=True)
        results = {} if args.seeds_only else bench_sizes(args)
        results["seeds"] = bench_seeds(args)
        if not args.seeds_only:
            print_variants(results)
            print_stages(results)
            print_memory(results)
        print_seeds(results["seeds"])
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
