"""A griffe extension: bizmsg's docstrings are written in reST style; this makes them Markdown.

- ``:class:`X```, ``:meth:`m```, ``:func:``, ``:attr:``, ``:exc:``, ``:mod:`` roles become
  cross-references to the rendered object (resolved from the docstring's own class and module,
  then from the ``bizmsg`` namespace), or plain code when the target is private or unknown, so a
  role can never break the strict build.
- ``>>>`` doctest lines become a fenced ``pycon`` block (Markdown would read ``>>>`` as nested
  block quotes).
- A paragraph ending in ``::`` followed by an indented block becomes a fenced code block.

Double-backtick literals (````x````) are already valid Markdown code spans and are left alone.
Loaded by mkdocs.yml (``plugins.mkdocstrings.handlers.python.options.extensions``).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(class|meth|func|attr|exc|mod|data|obj):`(~?)([^`]+)`")


def _lookup(root: griffe.Module, path: str) -> griffe.Object | None:
    """The object at a dotted ``path`` under the ``bizmsg`` package, aliases followed."""
    parts = path.split(".")
    if not parts or parts[0] != root.name:
        return None
    current: Any = root
    for part in parts[1:]:
        try:
            if current.is_alias:
                current = current.final_target
            current = current.members[part]
        except (KeyError, AttributeError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            return None
    try:
        return current.final_target if current.is_alias else current
    except (griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None


#: Private modules whose public classes the reference renders (the clients, the resources, the
#: campaign's objects), and single private objects it renders under their public names.
_RENDERED_MODULES = (
    "bizmsg._client", "bizmsg._resources.messages", "bizmsg._resources.listings",
    "bizmsg._campaign.message", "bizmsg._campaign.results",
)
_RENDERED = (
    "bizmsg._pagination.Page", "bizmsg._model.ResponseMeta", "bizmsg._timeout.Timeout",
    "bizmsg._native.SendOutcome", "bizmsg._pagination.to_pandas", "bizmsg._logging.refresh_logging",
)


def _is_documented(obj: griffe.Object) -> bool:
    """Whether the API reference renders ``obj``: its module path is public, or it is one of
    the private objects the reference shows by name, or a public member of one."""
    path = obj.path
    owner = next((shown for shown in _RENDERED if path == shown or path.startswith(shown + ".")),
                 None)
    if owner is None:
        owner = next((module for module in _RENDERED_MODULES if path.startswith(module + ".")),
                     None)
    if owner is None:
        return not any(part.startswith("_") for part in path.split(".")[1:])
    # Private helpers of those (and private members) stay unlinked.
    return not any(part.startswith("_") and not part.startswith("__")
                   for part in path[len(owner) + 1:].split("."))


class ReSTDocstrings(griffe.Extension):
    """See the module docstring."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name != "bizmsg":
            return
        for obj in _walk(pkg):
            if obj.docstring is not None:
                obj.docstring.value = _convert(obj.docstring.value, obj, pkg)


def _walk(obj: griffe.Object) -> list[griffe.Object]:
    found: list[griffe.Object] = [obj]
    for member in obj.members.values():
        if member.is_alias:
            continue
        found.extend(_walk(member))  # type: ignore[arg-type]
    return found


def _scopes(obj: griffe.Object) -> list[str]:
    """Where a relative role target is looked up, innermost first."""
    scopes: list[str] = []
    current: griffe.Object | None = obj
    while current is not None:
        if current.is_class or current.is_module:
            scopes.append(current.path)
        current = current.parent  # type: ignore[assignment]
    return scopes + ["bizmsg", "bizmsg.errors", "bizmsg.testing"]


def _resolve(target: str, obj: griffe.Object, root: griffe.Module) -> griffe.Object | None:
    target = target.strip().removesuffix("()")
    if target.startswith("bizmsg."):
        return _lookup(root, target)
    for scope in _scopes(obj):
        found = _lookup(root, f"{scope}.{target}")
        if found is not None:
            return found
    return None


def _role(match: re.Match[str], obj: griffe.Object, root: griffe.Module) -> str:
    _kind, tilde, target = match.groups()
    shown = target.strip().removesuffix("()")
    if tilde:
        shown = shown.rsplit(".", 1)[-1]
    if match.group(1) in ("meth", "func"):
        shown += "()"
    found = _resolve(target, obj, root)
    if found is None or not _is_documented(found):
        return f"`{shown}`"
    return f"[`{shown}`][{found.path}]"


def _convert(text: str, obj: griffe.Object, root: griffe.Module) -> str:
    text = _ROLE.sub(lambda m: _role(m, obj, root), text)
    return _literal_blocks(_doctests(text))


def _doctests(text: str) -> str:
    out: list[str] = []
    block: list[str] = []

    def close() -> None:
        if block:
            out.extend(["", "```pycon", *block, "```", ""])
            block.clear()

    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith(">>>") or (block and stripped.startswith("...")):
            block.append(stripped)
        else:
            close()
            out.append(line)
    close()
    return "\n".join(out)


def _literal_blocks(text: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.rstrip().endswith("::") and index + 1 < len(lines) and not lines[index + 1].strip():
            start = index + 2
            end = start
            while end < len(lines) and (not lines[end].strip() or lines[end].startswith((" ", "\t"))):
                end += 1
            body = lines[start:end]
            while body and not body[-1].strip():
                body.pop()
            if body:
                indent = min(len(b) - len(b.lstrip()) for b in body if b.strip())
                out.append(line.rstrip()[:-1])
                out.extend(["", "```python", *(b[indent:] for b in body), "```", ""])
                index = end
                continue
        out.append(line)
        index += 1
    return "\n".join(out)
