"""Where a whole `etl-project run` spends its time: a py-spy profile, summarized.

    python benchmarks/profile_run.py LANDING [--rate 100] [--work DIR] [--top 25] [--svg PATH]

Runs `etl-project run --seeds LANDING` with a fresh DAGSTER_HOME and warehouse under ``--work``
(default /tmp/etl_profile_run) under py-spy (``pip install -e ".[bench]"``; sampling another
process needs ptrace rights: root, or kernel.yama.ptrace_scope = 0), then prints:

- the run's steps with their durations, from the Dagster instance (what the UI shows);
- the profile's wall time split into start-up (imports, the instance), the run, and, inside both,
  time spent importing modules;
- the project's functions by inclusive share of samples (a step's asset or check function covers
  everything it calls), and the library lines under them that take the most samples.

py-spy samples the Python threads: time in Polars' or DuckDB's native threads shows as the
Python line waiting for them. ``--svg`` also writes a flame graph of the same run.
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FRAME = re.compile(r"(?P<func>.+?) \((?P<file>.+?):(?P<line>\d+)\)$")
PROJECT_MARK = "etl_project/"


def etl_project_command() -> list[str]:
    found = shutil.which("etl-project", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "etl_project.cli"]


def record(landing: Path, work: Path, rate: int, fmt: str, out: Path) -> Path:
    """Profile one run; returns its DAGSTER_HOME."""
    shutil.rmtree(work, ignore_errors=True)
    home, warehouse = work / "dagster_home", work / "warehouse"
    home.mkdir(parents=True)
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    cmd = ["py-spy", "record", "-r", str(rate), "-f", fmt, "-o", str(out), "--",
           *etl_project_command(), "run", "--seeds", str(landing), "--warehouse", str(warehouse)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0 or not out.exists():
        sys.exit(f"the profiled run failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return home


def step_durations(home: Path) -> tuple[float, list[tuple[str, float]]]:
    os.environ["DAGSTER_HOME"] = str(home)
    import dagster as dg

    with dg.DagsterInstance.get() as instance:
        run = instance.get_runs(limit=1)[0]
        stats = instance.get_run_stats(run.run_id)
        steps = sorted(instance.get_run_step_stats(run.run_id), key=lambda s: s.start_time or 0)
        return stats.end_time - stats.start_time, [(s.step_key, (s.end_time or 0) - (s.start_time or 0)) for s in steps]


def short(frame: str) -> str:
    """``func (file:line)`` with the file shortened to its package path."""
    match = FRAME.match(frame)
    if not match:
        return frame
    path = match["file"]
    for marker in ("site-packages/", "/lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    else:
        path = path.split(PROJECT_MARK, 1)[-1] if PROJECT_MARK in path else Path(path).name
        if PROJECT_MARK in match["file"]:
            path = PROJECT_MARK + path
    return f"{match['func']} ({path}:{match['line']})"


def summarize(profile: Path, rate: int, top: int) -> dict:
    samples = 0
    phases: collections.Counter = collections.Counter()
    project: collections.Counter = collections.Counter()
    under_project: collections.Counter = collections.Counter()
    for line in profile.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        samples += n
        frames = stack.split(";")
        in_run = any("run_in_process" in f for f in frames)
        importing = any(f.startswith("<module>") for f in frames[1:])
        phases["run" if in_run else "start-up"] += n
        if importing:
            phases[("run" if in_run else "start-up") + ": importing modules"] += n
        seen = set()
        for frame in frames:
            match = FRAME.match(frame)
            if match and PROJECT_MARK in match["file"] and not frame.startswith("<module>"):
                key = f"{match['func']} ({PROJECT_MARK}{match['file'].split(PROJECT_MARK, 1)[1]})"
                if key not in seen:
                    project[key] += n
                    seen.add(key)
        last_project = max((i for i, f in enumerate(frames) if PROJECT_MARK in f), default=None)
        if last_project is not None and last_project + 1 < len(frames):
            under_project[short(frames[-1])] += n
    seconds = {name: n / rate for name, n in phases.items()}
    return {
        "wall": samples / rate,
        "phases": seconds,
        "project": [(k, v / rate) for k, v in project.most_common(top)],
        "library_leaves": [(k, v / rate) for k, v in under_project.most_common(top)],
    }


def print_table(title: str, rows: list[tuple[str, float]], total: float) -> None:
    print(f"\n{title}")
    width = max((len(name) for name, _ in rows), default=10)
    for name, seconds in rows:
        print(f"  {name.ljust(width)}  {seconds:7.2f} s  {100 * seconds / total:5.1f}%")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("landing", type=Path)
    parser.add_argument("--rate", type=int, default=100, help="samples per second")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "etl_profile_run")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--svg", type=Path, help="also write a flame graph (a second, identical run)")
    args = parser.parse_args(argv)
    if not shutil.which("py-spy"):
        sys.exit('py-spy is not installed: pip install -e ".[bench]"')
    work = args.work.resolve()
    raw = work.parent / f"{work.name}.raw.txt"
    home = record(args.landing.resolve(), work, args.rate, "raw", raw)
    run_wall, steps = step_durations(home)
    summary = summarize(raw, args.rate, args.top)
    total = summary["wall"]
    print(f"etl-project run over {args.landing}: {total:.1f} s sampled; the Dagster run itself {run_wall:.1f} s")
    print_table("steps (from the Dagster instance)", steps, run_wall)
    print_table("phases (of the sampled wall time)", sorted(summary["phases"].items()), total)
    print_table("project functions, inclusive", summary["project"], total)
    print_table("library lines under project code, exclusive", summary["library_leaves"], total)
    print(f"\nraw profile: {raw}")
    if args.svg:
        record(args.landing.resolve(), work, args.rate, "flamegraph", args.svg)
        print(f"flame graph: {args.svg}")


if __name__ == "__main__":
    main()
