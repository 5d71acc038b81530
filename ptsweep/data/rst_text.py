"""Sphinx reStructuredText -> plain English prose, for building text corpora from documentation sources.

A line-based reader of the subset of reST that Sphinx documentation uses (docutils cannot read Sphinx's own
directives and roles). Kept: section titles, paragraphs, list items, the bodies of admonitions and of object
descriptions. Dropped: code (literal and doctest blocks, code directives), object signatures, navigation and
metadata, tables. Inline markup becomes what Sphinx shows (``:func:`~os.path.join``` -> ``join``, ``:pep:`8``` ->
``PEP 8``, an untitled ``:ref:`` -> its section's title). Paragraphs come out as lines separated by blank lines.
"""

from __future__ import annotations

import re
import string

# Directives whose whole block (arguments, options and body) is code, navigation or metadata.
DROPPED_DIRECTIVES = frozenset({
    "code-block", "sourcecode", "code", "doctest", "testcode", "testsetup", "testcleanup", "testoutput",
    "literalinclude", "parsed-literal", "productionlist", "toctree", "index", "highlight", "include", "contents",
    "tabularcolumns", "list-table", "csv-table", "table", "image", "figure", "raw", "math", "only", "module",
    "currentmodule", "moduleauthor", "sectionauthor", "program", "availability", "audit-event", "audit-event-table",
    "miscnews", "limited-api-list", "graphviz",
})
# Directives whose text after '::' is prose (a first sentence or a title); for the others it is a signature.
PROSE_ARGUMENT = frozenset({"note", "warning", "seealso", "important", "caution", "attention", "danger", "error",
                            "hint", "tip", "impl-detail", "admonition", "topic", "sidebar", "rubric", "epigraph"})
# Version directives: their first arguments are version numbers, the rest of the line is prose.
VERSION_ARGS = {"versionadded": 1, "versionchanged": 1, "deprecated": 1, "deprecated-removed": 2}

_EXPLICIT = re.compile(r"^\.\.(\s|$)")  # any explicit markup start: directive, comment, label, footnote
_DIRECTIVE = re.compile(r"^\.\.\s+([\w:-]+)::(?:\s+(.*))?$")
_OPTION = re.compile(r"^:[\w-]+:(\s.*)?$")  # directive options; as a paragraph, metadata (:Author: ...)
_ADORNMENT = re.compile(rf"^([{re.escape(string.punctuation)}])\1{{2,}}$")  # section over/underlines, transitions
_GRID_BORDER = re.compile(r"^\+[-=+]+\+$")  # +----+----+ starts a grid table
_SIMPLE_BORDER = re.compile(r"^=+( +=+)+$")  # =====  ===== starts a simple table of 2+ columns
_BULLET = re.compile(r"^(?:[*\-+•]|#\.|\d+\.|\(?[a-z0-9]\))\s+")
_LABEL = re.compile(r"^\.\.\s+_([^:]+):\s*$")

_LITERAL = re.compile(r"``(.+?)``")
_ROLE = re.compile(r"(?::[\w:+-]+:)`([^`]+)`")
_LINK = re.compile(r"`([^`<]+?)\s*<[^`>]*>`__?")
_REF_TARGET = re.compile(r"`([^`]+)`__?")
_DEFAULT_ROLE = re.compile(r"`([^`]+)`")
_FOOTNOTE_REF = re.compile(r"\s?\[(?:#[\w-]*|\d+|\*)\]_")
_STRONG = re.compile(r"\*\*(\S(?:.*?\S)?)\*\*")
_EMPHASIS = re.compile(r"(?<![\w*])\*(\S(?:[^*]*?\S)?)\*(?![\w*])")
_SUBSTITUTION = re.compile(r"\|(\w+)\|")
_ROLE_PREFIX = {"pep": "PEP ", "rfc": "RFC ", "issue": "bpo-", "gh": "gh-"}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _skip_block(lines: list[str], i: int, indent: int) -> int:
    """Index of the first line at or after ``i`` that is not blank and not indented more than ``indent``."""
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > indent):
        i += 1
    return i


def _skip_table(lines: list[str], i: int) -> int:
    """Past the table whose first border is line ``i``: a grid table ends at a blank line, a simple table at a
    border followed by a blank line (its header rule is followed by a row)."""
    if _GRID_BORDER.match(lines[i].strip()):
        return next((j for j in range(i, len(lines)) if not lines[j].strip()), len(lines))
    j = i + 1
    while j < len(lines):
        if _SIMPLE_BORDER.match(lines[j].strip()) and (j + 1 == len(lines) or not lines[j + 1].strip()):
            return j + 1
        j += 1
    return j


def section_labels(source: str) -> dict[str, str]:
    """{label: section title} for every ``.. _label:`` above a section title (with only blank lines and explicit
    markup such as other labels or ``.. index::`` between)."""
    lines = source.expandtabs(8).splitlines()
    out: dict[str, str] = {}
    for i, line in enumerate(lines):
        m = _LABEL.match(line.strip())
        if not m:
            continue
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or _EXPLICIT.match(lines[j].strip())):
            j = _skip_block(lines, j + 1, _indent(lines[j])) if lines[j].strip() else j + 1
        if j < len(lines) and _ADORNMENT.match(lines[j].strip()):  # an overlined title
            j += 1
        if j + 1 < len(lines) and _ADORNMENT.match(lines[j + 1].strip()):
            out[m.group(1).strip().lower()] = inline_text(lines[j].strip())
    return out


def inline_text(text: str, labels: dict[str, str] | None = None) -> str:
    """``text`` with its inline markup replaced by what a reader sees (inline literals kept verbatim)."""
    parts = _LITERAL.split(text)  # [markup, literal, markup, literal, ...]: escapes apply outside literals only
    parts[::2] = [_markup_text(p, labels or {}) for p in parts[::2]]
    return re.sub(r"\s+", " ", "".join(parts)).strip()


def _markup_text(text: str, labels: dict[str, str]) -> str:
    text = _ROLE.sub(lambda m: _role_text(m.group(0), m.group(1), labels), text)
    text = _LINK.sub(lambda m: m.group(1), text)
    text = _REF_TARGET.sub(lambda m: m.group(1), text)
    text = _DEFAULT_ROLE.sub(lambda m: m.group(1), text)
    text = _FOOTNOTE_REF.sub("", text)
    text = _STRONG.sub(lambda m: m.group(1), text)
    text = _EMPHASIS.sub(lambda m: m.group(1), text)
    text = _SUBSTITUTION.sub(lambda m: m.group(1), text)
    return re.sub(r"\\(.?)", lambda m: "" if m.group(1) in ("", " ") else m.group(1), text)  # escapes


def _role_text(whole: str, content: str, labels: dict[str, str]) -> str:
    """What Sphinx renders for ``:role:`content```: an explicit title, else the target, shortened by '~'."""
    role = whole[1:whole.index(":", 1)].lower()  # ':RFC:' is ':rfc:
    titled = re.match(r"^(.*?)\s*<([^<>]*)>$", content, re.S)
    if titled and titled.group(1):
        return titled.group(1)
    target = content.lstrip("!")
    if role == "ref":  # no title: the referenced section's title (Sphinx does the same)
        return labels.get(target.lower(), target.replace("-", " ").replace("_", " "))
    if target.startswith("~"):
        target = target[1:].rpartition(".")[2]
    if role == "abbr":  # 'LIFO (last-in, first-out)' shows as LIFO
        target = target.split(" (")[0]
    return _ROLE_PREFIX.get(role, "") + target


def _directive_prose(name: str, argument: str) -> str:
    """The prose part of a directive line's arguments ('' for signatures and version numbers)."""
    if name in PROSE_ARGUMENT:
        return argument
    if name in VERSION_ARGS:
        return " ".join(argument.split()[VERSION_ARGS[name]:])
    return ""


def _skip_directive_head(lines: list[str], i: int, indent: int, name: str) -> int:
    """Past the option lines (``:synopsis: ...``) and signature continuations that follow a kept directive line."""
    prev = lines[i - 1].rstrip()
    while i < len(lines) and lines[i].strip() and _indent(lines[i]) > indent:
        s = lines[i].strip()
        continuation = prev.endswith("\\") or (name not in PROSE_ARGUMENT and name not in VERSION_ARGS
                                                and _indent(lines[i]) > indent + 3)
        if not (_OPTION.match(s) or continuation):
            break
        prev = lines[i].rstrip()
        i += 1
    return i


def _explicit_block(lines: list[str], i: int) -> tuple[int, str | None]:
    """Past the head of the explicit markup (``.. ``) or doctest (``>>>``) block at line ``i``: (the next line, the
    prose on a kept directive's line, or None when the whole block is dropped)."""
    s, indent = lines[i].strip(), _indent(lines[i])
    if s.startswith(">>>"):  # a doctest block: up to the next blank line
        while i < len(lines) and lines[i].strip():
            i += 1
        return i, None
    m = _DIRECTIVE.match(s)
    if m and m.group(1) not in DROPPED_DIRECTIVES:
        return _skip_directive_head(lines, i + 1, indent, m.group(1)), _directive_prose(m.group(1), m.group(2) or "")
    return _skip_block(lines, i + 1, indent), None  # a dropped directive, comment, label, footnote, substitution


def _literal_intro(text: str) -> str:
    """A paragraph line ending in '::' as Sphinx shows it: 'Example::' -> 'Example:', 'Example ::' and '::' -> ''."""
    head = text[:-2]
    return head + ":" if head and not head.endswith(" ") else head.rstrip()


def rst_to_text(source: str, labels: dict[str, str] | None = None) -> str:
    """The prose of one reST document (module docstring: what is kept and what is dropped)."""
    lines = source.expandtabs(8).splitlines()
    paragraphs: list[str] = []
    cur: list[str] = []
    text_indent = 0  # column of the current paragraph's text: a line at another column starts a new paragraph
    block_indent = 0  # column of the current paragraph's first line: a literal block is indented deeper
    in_list = False  # the current paragraph is a list item

    def flush() -> None:
        text = inline_text(" ".join(cur), labels)
        if text:
            paragraphs.append(text)
        cur.clear()

    i = 0
    while i < len(lines):
        s, indent = lines[i].strip(), _indent(lines[i])
        if _GRID_BORDER.match(s) or _SIMPLE_BORDER.match(s):  # a table: not prose
            flush()
            i = _skip_table(lines, i)
            continue
        if not s or _ADORNMENT.match(s) or s.startswith("**Source code:**") or (not cur and _OPTION.match(s)):
            flush()  # a title's underline ends the title's paragraph
            i += 1
            continue
        if _EXPLICIT.match(s) or s.startswith(">>>"):
            flush()
            i, prose = _explicit_block(lines, i)
            if prose is not None:  # a kept directive: its body follows, indented
                cur.append(prose)
                text_indent, block_indent, in_list = indent + 3, indent + 3, False
            continue
        # a list item starts after a blank line or right after another item; mid-paragraph, '+ 0.1' is text
        bullet = _BULLET.match(s) if not cur or (in_list and indent == block_indent) else None
        if bullet or (cur and indent != text_indent):  # a list item, a definition or a quote: a new paragraph
            flush()
        text = s[bullet.end():] if bullet else s
        if bullet and _LABEL.match(text):  # '*  .. _label:' marks the item
            text = ""
        if not cur:
            text_indent, block_indent, in_list = indent + (bullet.end() if bullet else 0), indent, bool(bullet)
        i += 1
        if text.endswith("::"):  # a literal block follows: drop it
            cur.append(_literal_intro(text))
            flush()
            i = _skip_block(lines, i, block_indent)
        else:
            cur.append(text)
    flush()
    return "\n\n".join(paragraphs) + ("\n" if paragraphs else "")
