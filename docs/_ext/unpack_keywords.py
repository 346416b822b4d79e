"""A griffe extension: a signature with ``**options: Unpack[SomeTypedDict]`` is shown with those
keywords spelled out, each with its type and its default, as a signature that lists them itself.

bizmsg declares the keywords of a campaign once, as a TypedDict (``CampaignOptions``) with a
table of defaults (``DEFAULTS``, named by the ``defaults`` option in mkdocs.yml); the methods
take ``**options: Unpack[CampaignOptions]``. This does for the API reference what
``spelled_out`` (``_resources/campaign_options.py``) does for ``help()``: the keywords in the
order of the defaults table, before the method's own keyword-only parameters. Read statically,
like the rest of the reference. Loaded by mkdocs.yml
(``plugins.mkdocstrings.handlers.python.options.extensions``).
"""

from __future__ import annotations

from typing import Any

import griffe

_UNPACK = ("typing.Unpack", "typing_extensions.Unpack")


class UnpackKeywords(griffe.Extension):
    """See the module docstring."""

    def __init__(self, defaults: str) -> None:
        super().__init__()
        #: The dotted path of the table of defaults (a module-level dict literal).
        self.defaults = defaults

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        root, _, path = self.defaults.partition(".")
        if pkg.name != root:
            return
        table = pkg[path].value
        if not isinstance(table, griffe.ExprDict):
            raise TypeError(f"{self.defaults} is not a dict literal")
        defaults = {str(key).strip("'\""): str(value)
                    for key, value in zip(table.keys, table.values)}
        for function in _functions(pkg):
            _spell_out(function, defaults)


def _functions(obj: griffe.Object) -> list[griffe.Function]:
    found: list[griffe.Function] = []
    for member in obj.members.values():
        if member.is_alias:
            continue
        if isinstance(member, griffe.Function):
            found.append(member)
            found.extend(member.overloads or [])
        elif isinstance(member, (griffe.Class, griffe.Module)):
            found.extend(_functions(member))
    return found


def _spell_out(function: griffe.Function, defaults: dict[str, str]) -> None:
    variadic = next((p for p in function.parameters if p.kind is griffe.ParameterKind.var_keyword),
                    None)
    annotation = variadic.annotation if variadic is not None else None
    if not (isinstance(annotation, griffe.ExprSubscript)
            and annotation.canonical_path in _UNPACK):
        return
    typed_dict = function.modules_collection[annotation.slice.canonical_path]
    keys = {name: attribute for name, attribute in typed_dict.all_members.items()
            if isinstance(attribute, griffe.Attribute) or getattr(attribute, "is_attribute", False)}
    missing = set(keys) - set(defaults)
    if missing:
        raise ValueError(f"{typed_dict.path}: no default for {sorted(missing)}")
    own = [p for p in function.parameters if p is not variadic]
    leading = [p for p in own if p.kind is not griffe.ParameterKind.keyword_only]
    trailing = [p for p in own if p.kind is griffe.ParameterKind.keyword_only]
    spelled = [griffe.Parameter(name, annotation=keys[name].annotation,
                                kind=griffe.ParameterKind.keyword_only, default=default)
               for name, default in defaults.items() if name in keys]
    function.parameters = griffe.Parameters(*leading, *spelled, *trailing)
