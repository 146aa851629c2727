"""paper_links: URLs found, trimmed, classified; e-mail addresses never; the seeds' repositories."""

import polars as pl
import pytest

from etl_project.enrich.links import LINKS_SCHEMA, extract_links
from etl_project_tests.enrich_seeds import seed_papers


def links_of(*abstracts: str) -> pl.DataFrame:
    papers = pl.DataFrame({"paper_id": [f"p{i}" for i in range(len(abstracts))], "abstract": list(abstracts)})
    return extract_links(papers)


def urls(abstract: str) -> list[str]:
    return links_of(abstract)["url"].to_list()


@pytest.mark.parametrize(
    ("abstract", "expected"),
    [
        ("The source code is available at https://github.com/destiny301/uefl.", ["https://github.com/destiny301/uefl"]),
        ("Code (https://github.com/divelab/AIRS/) is released.", ["https://github.com/divelab/AIRS/"]),
        ("See https://en.wikipedia.org/wiki/Foo_(bar).", ["https://en.wikipedia.org/wiki/Foo_(bar)"]),
        ("(see https://en.wikipedia.org/wiki/Foo_(bar)).", ["https://en.wikipedia.org/wiki/Foo_(bar)"]),
        ("Data at https://x.org/data?id=1&v=2, code at https://x.org/code!", ["https://x.org/data?id=1&v=2", "https://x.org/code"]),
        ("Our project: “https://x.org/p”; our demo: <https://x.org/d>", ["https://x.org/p", "https://x.org/d"]),
        ("see [code](https://github.com/a/b) and *https://x.org/em*", ["https://github.com/a/b", "https://x.org/em"]),
        ("Code:https://github.com/a/b and www.Example.org/x.", ["https://github.com/a/b", "http://www.example.org/x"]),
        ("HTTPS://GitHub.COM/Owner/Repo/tree/Main", ["https://github.com/Owner/Repo/tree/Main"]),
        ("code: github.com/owner/repo, models: huggingface.co/org/model.", ["https://github.com/owner/repo", "https://huggingface.co/org/model"]),
        ("Twice: https://x.org/a and again https://x.org/a.", ["https://x.org/a"]),
        ("Voir «https://x.org/fr» et https://x.org/b…", ["https://x.org/fr", "https://x.org/b"]),
        ("代码见https://github.com/a/b。数据见 https://x.org/d，谢谢", ["https://github.com/a/b", "https://x.org/d"]),
    ],
)
def test_urls_are_trimmed_like_a_linkifier(abstract: str, expected: list[str]):
    assert urls(abstract) == expected


@pytest.mark.parametrize(
    "abstract",
    [
        "Contact ann.lee@www.example.org or bob@github.com/foo for details.",
        "Write to first.last@cs.stanford.edu.",
        "No link here, a.b.c and github dot com, nor in xhttps://no.pe/x or ftp.x.org.",
        "An empty scheme https:// and a host without a dot https://localhost/x.",
    ],
)
def test_no_email_addresses_and_no_junk(abstract: str):
    assert urls(abstract) == []


def test_kinds_and_repositories():
    found = links_of(
        "Code https://github.com/EleutherAI/delphi.git and https://gitlab.com/grp/sub/proj/-/tree/main "
        "and https://gist.github.com/u/abc; data https://huggingface.co/datasets/org/ds and "
        "https://zenodo.org/records/1; model https://huggingface.co/org/model; demo "
        "https://huggingface.co/spaces/org/app; hub https://huggingface.co/bench-llms; review "
        "https://anonymous.4open.science/r/CASEBench-D5DB; page https://shieldagent-aiguard.github.io/; "
        "paper https://arxiv.org/abs/2501.00001; pkg https://pypi.org/project/x; site page "
        "https://github.com/features/actions; elsewhere https://example.com/tool."
    )
    rows = {r["url"]: (r["kind"], r["owner"], r["name"]) for r in found.iter_rows(named=True)}
    assert rows == {
        "https://github.com/EleutherAI/delphi.git": ("code_repository", "EleutherAI", "delphi"),
        "https://gitlab.com/grp/sub/proj/-/tree/main": ("code_repository", "grp/sub", "proj"),
        "https://gist.github.com/u/abc": ("code_repository", None, None),
        "https://huggingface.co/datasets/org/ds": ("dataset", "org", "ds"),
        "https://zenodo.org/records/1": ("dataset", None, None),
        "https://huggingface.co/org/model": ("model", "org", "model"),
        "https://huggingface.co/spaces/org/app": ("demo", "org", "app"),
        "https://huggingface.co/bench-llms": ("hub_page", "bench-llms", None),
        "https://anonymous.4open.science/r/CASEBench-D5DB": ("anonymous_review", None, None),
        "https://shieldagent-aiguard.github.io/": ("project_page", None, None),
        "https://arxiv.org/abs/2501.00001": ("paper", None, None),
        "https://pypi.org/project/x": ("package", None, None),
        "https://github.com/features/actions": ("other", None, None),
        "https://example.com/tool": ("other", None, None),
    }
    assert found["link_rank"].to_list() == list(range(1, found.height + 1))
    assert found.filter(pl.col("url").str.contains("anonymous"))["host"].item() == "anonymous.4open.science"


def test_schema_holds_without_any_link():
    found = links_of("Nothing to link.", "Still nothing.")
    assert found.height == 0
    assert found.schema == pl.Schema(LINKS_SCHEMA)


def test_github_repositories_of_the_seeds():
    found = extract_links(seed_papers())
    github = found.filter(pl.col("host") == "github.com")
    assert set(zip(github["owner"], github["name"])) == {
        ("ethz-spylab", "AutoAdvExBench"),
        ("daniel-gomm", "CoDy"),
        ("EleutherAI", "delphi"),
        ("destiny301", "uefl"),
        ("ParkSeokhun", "ANOVA-TPNN"),
        ("justincui03", "or-bench"),
        ("TanSongBai", "WMarkGPT"),
        ("divelab", "AIRS"),
    }
    assert set(found["url"]) == {
        "https://github.com/ethz-spylab/AutoAdvExBench",
        "https://github.com/daniel-gomm/CoDy",
        "https://anonymous.4open.science/r/CASEBench-D5DB",
        "https://github.com/EleutherAI/delphi",
        "https://github.com/destiny301/uefl",
        "https://github.com/ParkSeokhun/ANOVA-TPNN",
        "https://huggingface.co/bench-llms",
        "https://github.com/justincui03/or-bench",
        "https://github.com/TanSongBai/WMarkGPT",
        "https://github.com/divelab/AIRS/",
        "https://shieldagent-aiguard.github.io/",
    }


def test_a_link_only_a_near_duplicate_carries_belongs_to_its_paper():
    from etl_project import dedup
    from etl_project_tests.conftest import normalized_records

    words = " ".join(f"word{i}" for i in range(60))
    canonical = f"We study {words} and report results."
    variant = canonical + " Code is available at https://github.com/acme/tool."
    records = normalized_records([("a.txt", 1, canonical), ("b.txt", 1, variant), ("c.txt", 1, variant)])
    papers, occurrences = dedup.deduplicate(records)
    assert papers.height == 1 and set(occurrences["match_kind"]) == {"canonical", "near"}
    texts = dedup.variant_texts(occurrences, records)
    assert texts["abstract"].to_list() == [papers["abstract"][0], variant]  # canonical first, once each
    found = extract_links(texts)
    assert found.select("paper_id", "url", "owner", "name", "link_rank").rows() == [
        (papers["paper_id"][0], "https://github.com/acme/tool", "acme", "tool", 1)
    ]
