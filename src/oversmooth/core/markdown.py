"""Markdown the docs' generated blocks are made of: list items and paragraphs wrapped to a width (the docs keep
their lines under 120 characters, tests/test_docs.py), inside a code span only where it is longer than a line, so
that no wrapped line starts with what Markdown would read as a new list item."""

from __future__ import annotations

import re
import textwrap

WIDTH = 118
_CODE_SPAN = re.compile(r"`[^`]*`")
_KEPT_SPACE = "\x00"
# the space before a word that opens a list, quote or heading where it starts a line
_BLOCK_OPENER = re.compile(r" (?=(?:[-+*>]|#+|\d+[.)])(?: |$))")


def unbroken(phrase: str) -> str:
    """`phrase` as `wrap` keeps it: on one line (a code span is kept so without it, where it fits a line)."""
    return phrase.replace(" ", _KEPT_SPACE)


def _kept_span(span: re.Match, room: int) -> str:
    """A code span kept on one line where it fits one, with what is glued to it (`unbroken`, punctuation); a longer
    one breaks at its spaces (Markdown reads a line break inside a code span as a space)."""
    before = re.search(r"\S*$", span.string[:span.start()])[0]
    after = re.match(r"\S*", span.string[span.end():])[0]
    fits = len(before) + len(span[0]) + len(after) <= room
    return span[0].replace(" ", _KEPT_SPACE) if fits else span[0]


def wrap(text: str, width: int = WIDTH, first: str = "", rest: str = "") -> str:
    """`text` on lines of at most `width` characters (only a word longer than a line is longer), the first line
    opening with `first`, the others with `rest`; a code span that fits a line stays on one."""
    kept = _CODE_SPAN.sub(lambda span: _kept_span(span, width - max(len(first), len(rest))), text)
    kept = _BLOCK_OPENER.sub(_KEPT_SPACE, kept)  # such a word stays on the line of the word before it
    lines = textwrap.wrap(kept, width, initial_indent=first, subsequent_indent=rest, break_long_words=False,
                          break_on_hyphens=False)
    return "\n".join(lines).replace(_KEPT_SPACE, " ")


def list_item(text: str, width: int = WIDTH) -> str:
    """A list item (`- text`), its further lines indented under it."""
    return wrap(text, width, "- ", "  ")
