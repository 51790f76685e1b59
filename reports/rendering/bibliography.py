"""The paper's bibliography: the works paper.tex may cite live in references.bib beside
this module (BibTeX, package data); a report's own references.bib holds exactly the works its
paper.tex cites, plus fwbench itself with the run's year, and paper.tex reads it through BibTeX
(natbib, plainnat: author-year).

    entries(path)      key -> the entry's BibTeX text of a .bib file (entries_text: of its text)
    cited(tex)         the keys a LaTeX text cites (\\cite, \\citep, \\citet, ...), in order
    cite_phrases(s)    escaped LaTeX prose with the works the report's words name ("Bretz et al.
                       2009", "Mytkowicz et al. 2009", "PaLM's 6N ...") cited
    bibtex(keys, year) references.bib for those keys, fwbench's own entry written for `year`

A key the paper cites but references.bib lacks is an error at render time (KeyError naming
it), never an undefined citation in the PDF.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

SOURCE = Path(__file__).with_name("references.bib")
FWBENCH = "fwbench"          # the software itself: its entry is written per report (the run's year)

_ENTRY = re.compile(r"@(\w+)\s*\{\s*([^,\s]+)\s*,")


def entries(path: Path | str) -> dict[str, str]:
    """key -> entry text of a .bib file, each entry from its '@' to its closing brace."""
    return entries_text(Path(path).read_text(encoding="utf-8"))


def entries_text(text: str) -> dict[str, str]:
    """key -> entry text of BibTeX source."""
    out = {}
    for m in _ENTRY.finditer(text):
        depth, i = 0, text.index("{", m.start())
        for j in range(i, len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                out[m.group(2)] = text[m.start():j + 1]
                break
    return out


@lru_cache(maxsize=1)
def _known() -> dict[str, str]:
    return entries(SOURCE)


def field(entry: str, name: str) -> str | None:
    """A field's value (its outer braces removed), or None."""
    m = re.search(r"^\s*" + name + r"\s*=\s*\{(.*)\},?\s*$", entry, re.M)
    return m.group(1) if m else None


_CITE = re.compile(r"\\cite[a-z]*\*?(?:\[[^\]]*\])*\{([^}]*)\}")


def cited(tex: str) -> list[str]:
    """The keys `tex` cites, first citation first, each once."""
    keys = [k.strip() for m in _CITE.finditer(tex) for k in m.group(1).split(",")]
    return list(dict.fromkeys(k for k in keys if k))


# Words of the report (its Method, its sections) that name a work: in paper.tex they cite it.
PHRASES = (
    (re.compile(r"Bretz et al\. 2009"), r"\\citet{bretz2009graphical}"),
    (re.compile(r"Mytkowicz et al\. 2009"), r"\\citet{mytkowicz2009producing}"),
    (re.compile(r"\bPaLM's\b"), r"PaLM's \\citep{chowdhery2022palm}"),
    (re.compile(r"\bnanoGPT's\b"), r"nanoGPT's \\citep{karpathy2022nanogpt}"),
    (re.compile(r"two one-(\\allowbreak\{\})?sided tests(?! \\cite)"), r"\g<0> \\citep{schuirmann1987comparison}"),
    (re.compile(r"Holm's step-(\\allowbreak\{\})?down procedure"), r"\g<0> \\citep{holm1979simple}"),
)


def cite_phrases(latex_text: str) -> str:
    """Escaped LaTeX prose with each work PHRASES names cited where it is named."""
    for pat, rep in PHRASES:
        latex_text = pat.sub(rep, latex_text)
    return latex_text


def _fwbench(year: int | None, note: str) -> str:
    return ("@misc{" + FWBENCH + ",\n  author = {{The fwbench contributors}},\n"
            "  title = {fwbench: equal-work benchmarks of {PyTorch}, {JAX} and {TensorFlow}},\n"
            f"  howpublished = {{Software{', ' + note if note else ''}}},\n"
            + (f"  year = {{{year}}},\n" if year else "") + "}")


def bibtex(keys: list[str], year: int | None = None, note: str = "") -> str:
    """references.bib with exactly `keys`, in that order (fwbench's own entry for `year`, with
    `note`, e.g. its commit); a key references.bib lacks raises KeyError naming it."""
    known = _known()
    missing = [k for k in keys if k != FWBENCH and k not in known]
    if missing:
        raise KeyError(f"paper.tex cites {', '.join(missing)}, which reports/rendering/references.bib lacks")
    head = "% The works paper.tex cites (fwbench's reports/rendering/references.bib); compile with BibTeX.\n\n"
    return head + "\n\n".join(_fwbench(year, note) if k == FWBENCH else known[k] for k in keys) + "\n"
