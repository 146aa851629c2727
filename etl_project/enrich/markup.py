"""LaTeX and markdown markup to plain text, as Polars expressions (``abstract_plain``).

Scraped abstracts carry the markup of the forms they were typed into: LaTeX (``$p<$0.0001``,
``\\emph{x}``, ``3\\%--22.1\\%``, ``\\'e``) and markdown (``*BOPO*``, ``**x**``, `` `FastPD` ``,
``[text](url)``). ``plain_text`` removes the markup and keeps every word:

- ``\\emph{x}``, ``\\textbf{x}``, ``\\mathbf{x}``, ``\\boldsymbol{x}``, ``\\url{x}`` ... become ``x``
  (innermost first, so nested commands unwrap too); ``\\frac{a}{b}`` becomes ``a/b``;
  ``\\href{url}{text}`` becomes ``text``.
- Accents (``\\'e``, ``\\"{o}``, ``\\c{c}``) become the accented letter; Greek letters and common
  math symbols (``\\alpha``, ``\\leq``, ``\\times``) their Unicode character; any other command
  loses its backslash (``\\log`` → ``log``).
- Inline math ``$...$`` loses its dollars (content kept; ``x^{2}`` → ``x^2``). A dollar pair whose
  content starts or ends with a space is not math (``$5 and $10``) and stays; ``\\$`` is a dollar.
- Escaped specials (``\\% \\& \\_ \\# \\{ \\}``) lose the backslash; ``---``/``--`` between numbers,
  spaces or ``%`` become an em/en dash (a ``--`` inside a word or URL stays); ````x''`` become
  curly quotes.
- Markdown emphasis (``*x*``, ``**x**``, ``_x_`` at word edges) and code spans (`` `x` ``) keep
  their content; ``[text](url)`` becomes ``text (url)``. A lone ``*`` (``2 * 3``) stays.
The result is NFC-normalized with whitespace folded. Plain text in, the same text out.
"""

import polars as pl

_DOLLAR = "\ue000"  # private-use placeholder for an escaped dollar while math is unwrapped

# Commands whose single argument is the text to keep.
_UNWRAP = (
    "emph|textbf|textit|texttt|textsc|textrm|textsf|textup|textmd|textnormal|underline|uline|"
    "mathrm|mathbf|mathit|mathsf|mathtt|mathcal|mathbb|mathfrak|mathscr|boldsymbol|bm|"
    "operatorname|text|mbox|hbox|url|nolinkurl|texorpdfstring|ensuremath|vec|hat|bar|tilde|"
    "widehat|widetilde|overline|dot|ddot|mathnormal|pmb|textnormal|footnote"
)
_ACCENTS = {"'": "\u0301", "`": "\u0300", "^": "\u0302", '"': "\u0308", "~": "\u0303",
            "=": "\u0304", ".": "\u0307"}
_LETTER_ACCENTS = {"u": "\u0306", "v": "\u030c", "H": "\u030b", "c": "\u0327", "k": "\u0328", "r": "\u030a"}
_SYMBOLS = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε",
    "zeta": "ζ", "eta": "η", "theta": "θ", "vartheta": "ϑ", "iota": "ι", "kappa": "κ",
    "lambda": "λ", "mu": "μ", "nu": "ν", "xi": "ξ", "pi": "π", "rho": "ρ", "sigma": "σ",
    "tau": "τ", "upsilon": "υ", "phi": "φ", "varphi": "φ", "chi": "χ", "psi": "ψ", "omega": "ω",
    "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ", "Lambda": "Λ", "Xi": "Ξ", "Pi": "Π", "Sigma": "Σ",
    "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω",
    "leq": "≤", "le": "≤", "geq": "≥", "ge": "≥", "neq": "≠", "ne": "≠", "approx": "≈",
    "sim": "~", "times": "×", "cdot": "·", "cdots": "⋯", "ldots": "…", "dots": "…", "pm": "±",
    "mp": "∓", "infty": "∞", "in": "∈", "notin": "∉", "subset": "⊂", "subseteq": "⊆",
    "cup": "∪", "cap": "∩", "to": "→", "rightarrow": "→", "leftarrow": "←", "Rightarrow": "⇒",
    "mapsto": "↦", "ell": "ℓ", "partial": "∂", "nabla": "∇", "sqrt": "√", "sum": "∑",
    "prod": "∏", "int": "∫", "forall": "∀", "exists": "∃", "propto": "∝", "ll": "≪", "gg": "≫",
    "equiv": "≡", "langle": "⟨", "rangle": "⟩", "top": "⊤", "emptyset": "∅", "circ": "∘",
    "star": "⋆", "ast": "∗", "sharp": "♯", "dagger": "†", "S": "§", "textasciitilde": "~",
    "textendash": "–", "textemdash": "—", "%": "%", "&": "&", "_": "_", "#": "#", "{": "{", "}": "}",
}
# Emphasis delimiters only at word edges (CommonMark's flanking rule, simplified): "a*b*c" stays.
_EMPHASIS = r"(^|[^\p{{L}}\d*_\\])(?:{mark})([^\s*_](?:[^*_\n]*?[^\s*_])?)(?:{mark})([^\p{{L}}\d*_]|$)"
_START, _END = "\ue001", "\ue002"  # private-use marks around a recognized command
_LETTER_SYMBOLS = sorted((n for n in _SYMBOLS if n.isalpha()), key=len, reverse=True)
_SYMBOL_COMMAND = r"\\(" + "|".join(_LETTER_SYMBOLS) + r")([^A-Za-z]|$)"
_SYMBOL_TOKENS = [_START + n + _END for n in _LETTER_SYMBOLS] + ["\\" + n for n in _SYMBOLS if not n.isalpha()]
_SYMBOL_VALUES = [_SYMBOLS[n] for n in _LETTER_SYMBOLS] + [_SYMBOLS[n] for n in _SYMBOLS if not n.isalpha()]
# Every rule above and in plain_text needs one of these in its match (backslash, backtick, dollar,
# emphasis marks, link bracket, brace, "--", or the private-use marks the rules use as placeholders).
_MARKUP = r"[\\`$*_\[{\x{E000}-\x{E002}]|--"
_SPACING = r"\\[,;:! ]|\\quad\b|\\qquad\b|\\(?:left|right|big|Big|bigg|Bigg)\b"


def plain_text(text: pl.Expr) -> pl.Expr:
    """The text with LaTeX and markdown markup removed (rules in the module docstring)."""
    out = text.str.replace_all(r"\\\$", _DOLLAR)
    out = out.str.replace_all(r"``([^`'\n]+)''", "“${1}”").str.replace_all(r"(^|[\s(])`([^`'\n]+)'", "${1}‘${2}’")
    for mark, combining in _ACCENTS.items():
        out = out.str.replace_all(r"\\" + _escape(mark) + r"\{?(\p{L})\}?", "${1}" + combining)
    for mark, combining in _LETTER_ACCENTS.items():
        out = out.str.replace_all(r"\\" + mark + r"\{(\p{L})\}", "${1}" + combining)
    out = out.str.replace_all(r"\\href\{[^{}]*\}\{([^{}]*)\}", "${1}")
    # Innermost first: a pass unwraps one level of braces; three levels cover real abstracts.
    for _ in range(3):
        out = (
            out.str.replace_all(r"\\(?:d|t)?frac\{([^{}]*)\}\{([^{}]*)\}", "${1}/${2}")
            .str.replace_all(r"\\(?:" + _UNWRAP + r")\*?\{([^{}]*)\}", "${1}")
            .str.replace_all(r"([\^_])\{([^{}]*)\}", "${1}${2}")
        )
    out = out.str.replace_all(_SPACING, " ")
    # Known commands in two passes: mark each whole command (a letter command ends at the first
    # non-letter, so "\\int" is not "\\in" + "t"), then swap the marked tokens for their symbols.
    for _ in range(2):  # a match consumes the character after it: "\\alpha\\beta" needs two passes
        out = out.str.replace_all(_SYMBOL_COMMAND, _START + "${1}" + _END + "${2}")
    out = out.str.replace_many(_SYMBOL_TOKENS, _SYMBOL_VALUES)
    out = out.str.replace_all(r"\\([A-Za-z]+)", "${1}")  # any other command: drop the backslash
    # Inline math: content must not start or end with a space (so "$5 and $10" is money).
    out = out.str.replace_all(r"\$\$([^$]+)\$\$", "${1}").str.replace_all(r"\$([^\s$](?:[^$]{0,400}?[^\s$])?)\$", "${1}")
    out = out.str.replace_all(_DOLLAR, "$$")
    out = out.str.replace_all(r"(^|[\d%\s)\]])---([\d\s(\[]|$)", "${1}—${2}")
    out = out.str.replace_all(r"(^|[\d%\s)\]])--([\d\s(\[]|$)", "${1}–${2}")
    # Markdown.
    out = out.str.replace_all(r"\[([^\[\]\n]+)\]\((https?://[^\s()]+)\)", "${1} (${2})").str.replace_all(r"`([^`\n]+)`", "${1}")
    for _ in range(2):  # a match consumes the character after it, so "*a* *b*" needs two passes
        for mark in (r"\*\*", r"\*", "__", "_"):
            out = out.str.replace_all(_EMPHASIS.format(mark=mark), "${1}${2}${3}")
    return _tidy(out)


def with_plain_text(frame: pl.DataFrame | pl.LazyFrame, source: str, target: str) -> pl.DataFrame:
    """``frame`` with ``target`` = ``plain_text(source)``. Only rows holding a character some
    rule needs (``_MARKUP``) go through the forty-odd markup passes; the others get only the final
    tidying, which is all ``plain_text`` does to them. Same result, several times cheaper on
    mostly plain abstracts. Only ``source`` is split and put back in order: the frame's other
    (long) columns are never copied. When ``frame`` has a ``target`` column already (carried from
    an earlier run), only its null rows are worked out."""
    frame = frame.collect() if isinstance(frame, pl.LazyFrame) else frame
    texts = frame.lazy().select(source, *([target] if target in frame.columns else [])).with_row_index("_row")
    known = texts.filter(pl.col(target).is_not_null()).select("_row", target) if target in frame.columns else None
    if known is not None:
        texts = texts.filter(pl.col(target).is_null())
    marked = pl.col(source).str.contains(_MARKUP).fill_null(False)
    plain = (
        pl.concat([
            *([known] if known is not None else []),
            texts.filter(marked).select("_row", plain_text(pl.col(source)).alias(target)),
            texts.filter(~marked).select("_row", _tidy(pl.col(source)).alias(target)),
        ])
        .sort("_row")
        .collect()
    )
    return frame.with_columns(plain[target])


def _tidy(text: pl.Expr) -> pl.Expr:
    return text.str.normalize("NFC").str.replace_all(r"\s+", " ").str.strip_chars()


def _escape(literal: str) -> str:
    return "".join("\\" + c if not c.isalnum() else c for c in literal)
