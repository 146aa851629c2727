"""Links: every URL in an abstract, trimmed the way a linkifier would, classified by kind.

Found (on the display text ``abstract``):
- ``http://``, ``https://`` and ``ftp://`` URLs, and ``www.`` hosts (given ``http://``, as GitHub
  Flavored Markdown's autolinker does);
- bare ``github.com/…``, ``gitlab.com/…``, ``bitbucket.org/…``, ``huggingface.co/…`` paths (given
  ``https://``, the only scheme those hosts serve).
A URL right after an ASCII letter or digit is not a link (``xhttps://``), and a bare host right
after ``@``, ``.``, ``-`` or ``/`` is not either: ``ann@www.x.org`` and
``me@github.com`` are e-mail addresses, and no e-mail address is ever reported.

A URL ends at whitespace, ``< > " { } | \\ ^``, a backtick, typographic quotes (« » “ ” ‘ ’ ...)
or CJK punctuation. Then, as in GFM's extended autolinks, trailing ``? ! . , : ; * _ ~ ' "`` (and
``…``) are dropped, and so is a trailing
``)`` (or ``]``) while the URL holds more closing than opening ones: ``(see https://x.org/a_(b)).``
gives ``https://x.org/a_(b)``. The scheme and host are lower-cased (as a browser does); the path
is kept as written.

``kind`` (first rule that applies; ``_KIND_RULES`` below):
``anonymous_review`` (anonymous.4open.science, or a forge owner named ``anonymous…``),
``dataset`` (Hugging Face ``/datasets/``, Zenodo, Figshare, Kaggle, Mendeley Data, Dataverse,
PhysioNet, OpenML, UCI, Dryad), ``demo`` (Hugging Face ``/spaces/``, ``*.hf.space``, Streamlit,
Gradio), ``model`` (any other Hugging Face repository), ``hub_page`` (a Hugging Face user or
organization page), ``code_repository`` (GitHub incl. gists, GitLab, Bitbucket, Codeberg, Gitee,
SourceForge, sr.ht), ``package`` (PyPI, CRAN, npm, crates.io, conda), ``notebook`` (Colab),
``paper`` (arXiv, OpenReview, DOI, ACL Anthology, PMLR, NeurIPS, ACM, IEEE, bioRxiv ...),
``video`` (YouTube, Vimeo, Bilibili), ``project_page`` (``*.github.io``, ``*.gitlab.io``,
Google Sites, Notion, Netlify, Vercel, Cloudflare Pages, Read the Docs, GitBook), else ``other``.
``CODE_KINDS`` are the kinds that count as released code.

``owner``/``name``: GitHub, Bitbucket, Codeberg, Gitee: the first two path segments (``.git``
dropped); GitLab: the last segment before ``/-/`` is the name, the groups before it the owner;
Hugging Face: ``owner/name`` after an optional ``datasets/`` or ``spaces/``. A user or organization
page has an owner and no name; site pages (``github.com/features``) have neither.
"""

import polars as pl

CODE_KINDS = ("code_repository", "package", "notebook", "anonymous_review")
KINDS = (
    "anonymous_review", "dataset", "demo", "model", "hub_page", "code_repository", "package",
    "notebook", "paper", "video", "project_page", "other",
)
LINKS_SCHEMA = {
    "paper_id": pl.String, "link_rank": pl.UInt32, "url": pl.String, "host": pl.String,
    "kind": pl.String, "owner": pl.String, "name": pl.String,
}

_URL_CHAR = r"[^\s<>\"{}|\\^`\p{Pi}\p{Pf}\x{3000}-\x{303F}\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF20}]"
_BARE_HOSTS = r"(?:github\.com|gitlab\.com|bitbucket\.org|huggingface\.co)/"
# The character before a URL must not continue an ASCII word (CJK text runs into URLs without a
# space); before a bare host, not an e-mail address or a domain either.
_CANDIDATE = (
    rf"(?i)(?:^|[^A-Za-z0-9_])(?:https?|ftp)://{_URL_CHAR}+"
    rf"|(?:^|[^A-Za-z0-9_@.\-/])(?:www\.|{_BARE_HOSTS}){_URL_CHAR}+"
)
_TRAILING = "?!.,:;*_~'\"…"
_PARTS = r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<userinfo>[^/?#@]*@)?(?P<host>[^/?#:]*)(?P<port>:\d*)?(?P<path>[^?#]*)(?P<tail>.*)$"

_FORGES_TWO_SEGMENTS = r"^(?:www\.)?(?:github\.com|bitbucket\.org|codeberg\.org|gitee\.com)$"
_GITHUB_SITE_PAGES = (
    "about", "apps", "collections", "customer-stories", "enterprise", "events", "explore",
    "features", "login", "marketplace", "notifications", "orgs", "pricing", "readme", "search",
    "security", "settings", "site", "sponsors", "topics", "trending",
)
_HF_SITE_PAGES = ("blog", "docs", "learn", "models", "papers", "pricing", "tasks", "join", "login", "settings")

# (kind, host regex, path regex or None); the first rule that matches wins.
_KIND_RULES = (
    ("other", r"^(?:www\.)?github\.com$", r"^/(?:" + "|".join(_GITHUB_SITE_PAGES) + r")(?:/|$)"),
    ("anonymous_review", r"(?:^|\.)anonymous\.4open\.science$", None),
    ("anonymous_review", r"^(?:github\.com|gitlab\.com|bitbucket\.org)$", r"(?i)^/anonymous[^/]*(?:/|$)"),
    ("dataset", r"^huggingface\.co$", r"^/datasets/"),
    ("dataset", r"(?:^|\.)(?:zenodo\.org|figshare\.com|kaggle\.com|data\.mendeley\.com|physionet\.org|openml\.org|archive\.ics\.uci\.edu|datadryad\.org)$|^dataverse\.", None),
    ("demo", r"^huggingface\.co$", r"^/spaces/"),
    ("demo", r"\.hf\.space$|\.streamlit\.app$|(?:^|\.)gradio\.live$", None),
    ("model", r"^huggingface\.co$", r"^/[^/]+/[^/]+"),
    ("hub_page", r"^huggingface\.co$", r"^/[^/]+/?$"),
    ("code_repository", r"^(?:www\.)?(?:github\.com|gist\.github\.com|gitlab\.com|bitbucket\.org|codeberg\.org|gitee\.com|sourceforge\.net|git\.sr\.ht|sr\.ht)$", None),
    ("package", r"^(?:pypi\.org|cran\.r-project\.org|(?:www\.)?npmjs\.com|crates\.io|anaconda\.org)$", None),
    ("notebook", r"^colab\.research\.google\.com$", None),
    ("paper", r"(?:^|\.)(?:arxiv\.org|openreview\.net|doi\.org|aclanthology\.org|proceedings\.mlr\.press|papers\.nips\.cc|proceedings\.neurips\.cc|dl\.acm\.org|ieeexplore\.ieee\.org|semanticscholar\.org|link\.springer\.com|biorxiv\.org|medrxiv\.org|ssrn\.com)$", None),
    ("video", r"(?:^|\.)(?:youtube\.com|youtu\.be|vimeo\.com|bilibili\.com)$", None),
    ("project_page", r"\.github\.io$|\.gitlab\.io$|^sites\.google\.com$|\.notion\.site$|\.netlify\.app$|\.vercel\.app$|\.pages\.dev$|\.readthedocs\.io$|\.gitbook\.io$", None),
)


def trim_url(url: pl.Expr) -> pl.Expr:
    """One round of trailing-punctuation removal (see the module docstring); apply to a fixpoint."""
    last = url.str.slice(-1)

    def unbalanced(close: str, open_: str) -> pl.Expr:
        return (last == close) & (url.str.count_matches(rf"\{close}") > url.str.count_matches(rf"\{open_}"))

    strip = last.is_in(list(_TRAILING)) | unbalanced(")", "(") | unbalanced("]", "[")
    return pl.when(strip).then(url.str.slice(0, url.str.len_chars() - 1)).otherwise(url)


def extract_links(papers: pl.DataFrame, text_column: str = "abstract") -> pl.DataFrame:
    """One row per distinct URL per paper (``LINKS_SCHEMA``), in order of first appearance; a
    paper may have several rows (texts of its variants), read in their order."""
    found = (
        papers.lazy()
        .select("paper_id", text=pl.col(text_column))
        .with_row_index("text_order")
        .with_columns(raw=pl.col("text").str.extract_all(_CANDIDATE))
        .explode("raw")
        .drop_nulls("raw")
        # Drop the one character of context the pattern consumed before the URL.
        .with_columns(raw=pl.col("raw").str.replace(r"^[^A-Za-z]", ""))
        .with_columns(position=pl.col("text").str.find(pl.col("raw"), literal=True))
        .collect()
    )
    url = found["raw"]
    while True:  # a few rounds at most: each strips one character from every URL that needs it
        trimmed = found.select(trim_url(pl.lit(url))).to_series()
        if trimmed.equals(url):
            break
        url = trimmed
    parts = (
        found.select("paper_id", "text_order", "position")
        .with_columns(url=url)
        .with_columns(
            url=pl.when(pl.col("url").str.contains(r"(?i)^[a-z][a-z0-9+.-]*://"))
            .then(pl.col("url"))
            .when(pl.col("url").str.contains(r"(?i)^www\."))
            .then(pl.lit("http://") + pl.col("url"))
            .otherwise(pl.lit("https://") + pl.col("url"))
        )
        .with_columns(p=pl.col("url").str.extract_groups(_PARTS))
        .unnest("p")
        .with_columns(host=pl.col("host").str.to_lowercase().str.strip_chars_end("."))
        .filter(pl.col("host").str.contains(r"^[\p{L}\d-]+(?:\.[\p{L}\d-]+)+$"))
        .with_columns(
            url=pl.col("scheme").str.to_lowercase() + "://" + pl.col("userinfo").fill_null("")
            + pl.col("host") + pl.col("port").fill_null("") + pl.col("path") + pl.col("tail")
        )
    )
    segments = pl.col("path").str.strip_chars("/").str.split("/")
    links = (
        parts.with_columns(kind=_kind(pl.col("host"), pl.col("path")), **_owner_name(pl.col("host"), pl.col("path"), segments))
        # Stable: a URL that is a prefix of an earlier one shares its position, and each paper's
        # rows must not depend on the other papers in the frame (enrich/reuse.py).
        .sort("paper_id", "text_order", "position", maintain_order=True)
        .unique(["paper_id", "url"], keep="first", maintain_order=True)
        .with_columns(link_rank=pl.int_range(1, pl.len() + 1, dtype=pl.UInt32).over("paper_id"))
    )
    return links.select(list(LINKS_SCHEMA)).cast(LINKS_SCHEMA)


def _kind(host: pl.Expr, path: pl.Expr) -> pl.Expr:
    expr = pl.lit("other")
    for kind, host_rule, path_rule in reversed(_KIND_RULES):
        condition = host.str.contains(host_rule)
        if path_rule is not None:
            condition = condition & path.str.contains(path_rule)
        expr = pl.when(condition).then(pl.lit(kind)).otherwise(expr)
    return expr


def _owner_name(host: pl.Expr, path: pl.Expr, segments: pl.Expr) -> dict[str, pl.Expr]:
    def seg(i) -> pl.Expr:
        return segments.list.get(i, null_on_oob=True).replace("", None)

    def strip_git(repo: pl.Expr) -> pl.Expr:
        return repo.str.replace(r"\.git$", "")

    github_like = host.str.contains(_FORGES_TWO_SEGMENTS) & ~seg(0).is_in(_GITHUB_SITE_PAGES)
    # GitLab: groups/subgroups/project, then optionally /-/tree/... ; without /-/ the last segment.
    gitlab_path = path.str.replace(r"/-/.*$", "").str.strip_chars("/").str.split("/")
    gitlab = host == "gitlab.com"
    hugging_face = (host == "huggingface.co") & ~seg(0).is_in(_HF_SITE_PAGES)
    hf_offset = pl.when(seg(0).is_in(["datasets", "spaces"])).then(1).otherwise(0)  # /datasets/owner/name

    owner = (
        pl.when(github_like).then(seg(0))
        .when(gitlab & (gitlab_path.list.len() >= 2)).then(gitlab_path.list.slice(0, gitlab_path.list.len() - 1).list.join("/"))
        .when(gitlab).then(gitlab_path.list.first().replace("", None))
        .when(hugging_face).then(seg(hf_offset))
    )
    name = (
        pl.when(github_like).then(strip_git(seg(1)))
        .when(gitlab & (gitlab_path.list.len() >= 2)).then(strip_git(gitlab_path.list.last()))
        .when(hugging_face).then(seg(hf_offset + 1))
    )
    return {"owner": owner, "name": name}
