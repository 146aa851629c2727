"""Ingest speed and memory: reading the landing files, ``ingest.parse_files`` and
``normalize.normalize_records``, this working tree against the same code at a git revision.

Every run is a fresh worker process that reads one corpus folder (``read_landing_file`` on every
listed file), parses it and normalizes the raw records: all at once, or batch by batch with
``--batch-mb`` as the pipeline does (each batch's tables dropped before the next batch is read).
Per stage it reports wall and CPU (user + sys) seconds summed over batches, the stage's largest
peak resident set above the resident set just before it (peak reset through
/proc/self/clear_refs), and the worker's peak resident set, also as a ratio to the input size. Runs of the two versions are interleaved
so that a noisy machine slows them alike; figures are medians over ``--runs``. CPU time is the
figure to compare on a shared machine: wall time includes waiting for other processes.

With ``--compare`` it instead checks that both versions give the same output on the corpora:
the same landed files and the same four tables of ``file_tables`` (values, dtypes and order),
batch by batch (``--batch-mb``) to bound memory.

    python benchmarks/parse_bench.py /work/bench/c100000 /work/bench/c1000000 --runs 3 --baseline HEAD~1
    python benchmarks/parse_bench.py /work/bench/c1000000 --baseline HEAD~1 --compare --batch-mb 256
"""

import argparse
import importlib.util
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this working tree's etl_project, not an installed one
STAGES = ("read", "parse", "normalize")


# --- worker ---------------------------------------------------------------------------------

def _load_revision(revision: str, into: Path):
    """``ingest`` and ``normalize`` as they were at ``revision`` (the rest of the package is this tree's)."""
    modules = {}
    for name in ("normalize", "ingest"):
        source = subprocess.run(["git", "-C", str(REPO), "show", f"{revision}:etl_project/{name}.py"],
                                check=True, capture_output=True, text=True).stdout
        path = into / f"rev_{name}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(f"rev_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules[name] = module
    modules["ingest"].normalize = modules["normalize"]
    return modules["ingest"], modules["normalize"]


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _batches(items: list, batch_bytes: int, size_of) -> list[list]:
    """Consecutive items in batches of at least ``batch_bytes`` (0: one batch)."""
    if batch_bytes <= 0:
        return [items]
    batches, current, size = [], [], 0
    for item in items:
        current.append(item)
        size += size_of(item)
        if size >= batch_bytes:
            batches.append(current)
            current, size = [], 0
    return batches + [current] if current else batches


def worker(version: str, corpus: Path, batch_mb: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        if version == "current":
            from etl_project import ingest, normalize
        else:
            ingest, normalize = _load_revision(version, Path(tmp))
        stages = {stage: {"wall": 0.0, "cpu": 0.0, "peak_mib": 0.0} for stage in STAGES}

        def measure(stage, run):
            Path("/proc/self/clear_refs").write_text("5")  # reset the peak RSS (VmHWM) to the current RSS
            before, wall, cpu = _rss_kib("VmRSS"), time.perf_counter(), _cpu()
            result = run()
            figures = stages[stage]
            figures["wall"] += time.perf_counter() - wall
            figures["cpu"] += _cpu() - cpu
            figures["peak_mib"] = max(figures["peak_mib"], (_rss_kib("VmHWM") - before) / 1024)
            return result

        paths = ingest.list_landing_files(corpus)
        input_bytes, count = sum(path.lstat().st_size for path in paths), 0
        # Batch by batch as callers do: each batch's output is dropped before the next is read.
        for batch in _batches(paths, batch_mb << 20, lambda path: path.lstat().st_size):
            files = measure("read", lambda: [ingest.read_landing_file(path, corpus) for path in batch])
            raw_records = measure("parse", lambda: ingest.parse_files(files).raw_records)
            del files
            records = measure("normalize", lambda: normalize.normalize_records(raw_records))
            assert records.height == raw_records.height
            count += records.height
            del raw_records, records
    print(json.dumps({"stages": stages, "records": count, "input_mib": input_bytes / 2**20,
                      "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


# --- same output ---------------------------------------------------------------------------

def compare(revision: str, corpus: Path, batch_mb: int) -> None:
    """Raise AssertionError at the first difference between the two versions' output."""
    import dataclasses

    from etl_project import ingest, normalize

    with tempfile.TemporaryDirectory() as tmp:
        old_ingest, old_normalize = _load_revision(revision, Path(tmp))
        paths = ingest.list_landing_files(corpus)
        assert paths == old_ingest.list_landing_files(corpus)
        counts = {"files": 0, "records": 0, "rejected": 0}
        for batch in _batches(paths, batch_mb << 20, lambda path: path.lstat().st_size):
            new = [ingest.read_landing_file(path, corpus) for path in batch]
            old = [old_ingest.read_landing_file(path, corpus) for path in batch]
            assert [dataclasses.astuple(f) for f in new] == [dataclasses.astuple(f) for f in old]
            del old
            new_parsed, old_parsed = ingest.parse_files(new), old_ingest.parse_files(new)
            del new
            tables = {
                "records": (normalize.normalize_records(new_parsed.raw_records), old_normalize.normalize_records(old_parsed.raw_records)),
                **{name: (getattr(new_parsed, name), getattr(old_parsed, name)) for name in ("source_files", "raw_records", "rejected_records")},
            }
            for name, (mine, theirs) in tables.items():
                assert mine.schema == theirs.schema, (name, mine.schema, theirs.schema)
                assert mine.equals(theirs), f"{name} differs in {corpus}"
            counts["files"] += new_parsed.source_files.height
            counts["records"] += new_parsed.raw_records.height
            counts["rejected"] += new_parsed.rejected_records.height
    print(f"{corpus}: identical to {revision} ({counts['files']} files, {counts['records']} records, "
          f"{counts['rejected']} rejected paragraphs)")


# --- driver ---------------------------------------------------------------------------------

def run_worker(version: str, corpus: Path, batch_mb: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", version, str(corpus), "--batch-mb", str(batch_mb)],
        check=True, capture_output=True, text=True, cwd=REPO,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="*", type=Path, help="landing folders to read")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", help="git revision to compare with (its ingest.py and normalize.py)")
    parser.add_argument("--batch-mb", type=int, default=0, help="parse and normalize files in batches of this many MiB (0: all at once)")
    parser.add_argument("--compare", action="store_true", help="check that --baseline gives the same output instead of timing")
    parser.add_argument("--worker", nargs=2, metavar=("VERSION", "CORPUS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker[0], Path(args.worker[1]), args.batch_mb)
        return
    if args.compare:
        if not args.baseline:
            parser.error("--compare needs --baseline")
        for corpus in args.corpora:
            compare(args.baseline, corpus, args.batch_mb)
        return
    versions = ([args.baseline] if args.baseline else []) + ["current"]
    print(f"{'corpus':<14}{'records':>9} {'version':<10}{'stage':<10}{'wall s':>8}{'cpu s':>8}{'cpu µs/rec':>11}"
          f"{'stage peak MiB':>15}{'worker peak MiB':>16}{'peak/input':>11}")
    for corpus in args.corpora:
        runs = {version: [] for version in versions}
        for _ in range(args.runs):
            for version in versions:  # interleaved: the machine's noise hits both alike
                runs[version].append(run_worker(version, corpus, args.batch_mb))
        for version in versions:
            results = runs[version]
            records, input_mib = results[0]["records"], results[0]["input_mib"]
            worker_peak = statistics.median(r["max_rss_mib"] for r in results)
            for stage in STAGES:
                wall = statistics.median(r["stages"][stage]["wall"] for r in results)
                cpu = statistics.median(r["stages"][stage]["cpu"] for r in results)
                peak = statistics.median(r["stages"][stage]["peak_mib"] for r in results)
                print(f"{corpus.name:<14}{records:>9} {version[:9]:<10}{stage:<10}{wall:>8.2f}{cpu:>8.2f}"
                      f"{cpu / records * 1e6:>11.2f}{peak:>15.0f}{worker_peak:>16.0f}{worker_peak / input_mib:>11.2f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
