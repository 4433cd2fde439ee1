"""Query rewrite (docs/design.md#rewrite), off by default; and the alias table the alias lanes share.

A rewriter has one method, ``rewrite(text) -> str``. The rewrite feeds the
lexical lanes; the dense lane encodes the ORIGINAL text concurrently, and
the title boost reads the ORIGINAL text. Rewrites are skipped for queries of
≤ 2 words and for queries that already look academic (see
:func:`skip_reason`).

* ``local`` — :class:`AliasRewriter`: acronyms and alternative names replaced
  by their canonical names from an alias table (``aliases.tsv`` shipped with
  the package, plus ``search.alias_file`` for a project's own). No network.
* a URL — :class:`ChatRewriter`: any OpenAI-compatible ``/chat/completions``
  endpoint (a local LLM server). Never a paid API by default; a failure
  leaves the query as typed and is reported in the metadata.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Protocol

from scix_core.errors import ConfigError, DataFormatError

_WORD = re.compile(r"[^\W_]+")
_ACADEMIC = re.compile(r'"|\b(?:AND|OR|NOT)\b|\b\d{4}\.\d{4,5}\b|\b10\.\d{4,}/|\w+:\S')


class Rewriter(Protocol):
    name: str

    def rewrite(self, text: str) -> str: ...


def skip_reason(text: str) -> str | None:
    """Why a query is not rewritten, or ``None``.

    Looks academic = quoted phrases, boolean operators, field syntax, an arXiv
    id or DOI, or a long sentence (≥ 12 words, e.g. a claim or an abstract).
    """
    words = _WORD.findall(text)
    if len(words) <= 2:
        return "skipped: 2 words or fewer"
    if _ACADEMIC.search(text) or len(words) >= 12:
        return "skipped: already looks academic"
    return None


@dataclass(frozen=True)
class Alias:
    alias: str
    canonical: str
    start: int
    end: int


class AliasTable:
    """alias -> canonical name, matched as a whole word, case-sensitively (``IR`` is not ``ir``)."""

    def __init__(self, entries: dict[str, str]):
        self.entries = dict(entries)
        keys = sorted(self.entries, key=len, reverse=True)  # longest first: "SNe Ia" before "SN"
        self._pattern = (
            re.compile("|".join(rf"(?<![\w-]){re.escape(k)}(?![\w-])" for k in keys)) if keys else None
        )

    @classmethod
    def load(cls, extra: Path | str | None = None) -> AliasTable:
        entries = _read(files("scix_core.search").joinpath("aliases.tsv").read_text(), "aliases.tsv")
        if extra:
            path = Path(extra).expanduser()
            if not path.is_file():
                raise ConfigError(f"alias file {path} does not exist")
            entries.update(_read(path.read_text(), str(path)))
        return cls(entries)

    def find(self, text: str) -> list[Alias]:
        if self._pattern is None:
            return []
        out, seen = [], set()
        for m in self._pattern.finditer(text):
            canonical = self.entries[m.group(0)]
            if canonical not in seen and canonical.casefold() not in text.casefold():
                seen.add(canonical)
                out.append(Alias(m.group(0), canonical, m.start(), m.end()))
        return out

    def replace(self, text: str, alias: Alias) -> str:
        return f"{text[: alias.start]}{alias.canonical}{text[alias.end :]}"

    def variant(self, text: str, keep: Alias, found: list[Alias]) -> str:
        """``text`` with ``keep`` replaced by its canonical name and the other found aliases removed:
        the query of one alias lane (so the AND semantics do not demand the other acronyms)."""
        for alias in sorted(found, key=lambda a: a.start, reverse=True):
            text = self.replace(text, alias) if alias == keep else f"{text[: alias.start]}{text[alias.end :]}"
        return " ".join(text.split())


def _read(text: str, where: str) -> dict[str, str]:
    out = {}
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise DataFormatError(where, n, "expected 'alias<TAB>canonical name'")
        out[parts[0].strip()] = parts[1].strip()
    return out


@cache
def alias_table(extra: str | None = None) -> AliasTable:
    return AliasTable.load(extra)


class AliasRewriter:
    name = "local"

    def __init__(self, table: AliasTable):
        self.table = table

    def rewrite(self, text: str) -> str:
        for alias in reversed(self.table.find(text)):  # right to left keeps earlier offsets valid
            text = self.table.replace(text, alias)
        return text


class ChatRewriter:
    """An OpenAI-compatible chat endpoint (``URL/chat/completions``), e.g. a local llama.cpp or vLLM
    server."""

    name = "chat"
    PROMPT = (
        "Rewrite the user's search query into a concise academic literature search query. "
        "Expand acronyms, use standard scientific terms, keep it under 20 words. Reply with the query only."
    )

    def __init__(self, url: str, model: str = "default", timeout_s: float = 5.0, api_key: str | None = None):
        self.url = url.rstrip("/") + (
            "" if url.rstrip("/").endswith("/chat/completions") else "/chat/completions"
        )
        self.model, self.timeout_s, self.api_key = model, timeout_s, api_key

    def rewrite(self, text: str) -> str:
        import httpx

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        body = {
            "model": self.model,
            "temperature": 0,
            "messages": [{"role": "system", "content": self.PROMPT}, {"role": "user", "content": text}],
        }
        response = httpx.post(self.url, json=body, headers=headers, timeout=self.timeout_s)
        response.raise_for_status()
        content = response.json()["choices"][0]["message"]["content"]
        rewritten = " ".join(str(content).strip().strip('"').split())
        if not rewritten:
            raise ValueError("the rewriter returned an empty query")
        return rewritten[:1000]


def get_rewriter(
    spec: str, alias_file: str | None = None, model: str = "default", timeout_s: float = 5.0
) -> Rewriter | None:
    """``off`` -> None, ``local`` -> aliases, ``http(s)://...`` -> an OpenAI-compatible endpoint."""
    if spec in ("off", "", None):
        return None
    if spec == "local":
        return AliasRewriter(alias_table(alias_file))
    if spec.startswith(("http://", "https://")):
        import os

        return ChatRewriter(spec, model, timeout_s, os.environ.get("SCIX_REWRITE_API_KEY"))
    raise ConfigError(
        f"rewrite must be off, local or an http(s) URL of an OpenAI-compatible server; got {spec!r}"
    )
