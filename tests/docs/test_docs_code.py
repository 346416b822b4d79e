"""Every Python code block of the README and of docs/ type-checks under ``pyright --strict``, and
every block that can run on its own runs, against a sandbox (the README's quickstart once
failed pyright --strict on ``result.meta.request_id``).

A block runs on its own unless the Markdown says otherwise, in an HTML comment (invisible on
GitHub and on the documentation site) on the line right before its fence::

    <!-- not run: continues the quickstart above; needs: client, rows -->

``not run:`` gives the reason the block cannot run alone (it continues another block, uses
your data, a real service, a notebook's ``display``); ``needs:`` names what it uses without
defining it. For the type check, each needed name is declared first with its type, from
:data:`NEEDS` (a name missing there fails the test: add it). A block with a top-level
``await``, ``async with`` or ``async for`` (a notebook's cell) is checked, and run, as the body
of an ``async def``.

The blocks that run get ``BIZMSG_TOKEN`` and ``BIZMSG_BASE_URL`` of a sandbox whose first
tenant owns the business number the documents send from (``+86 139 0000 0000``), and an empty
working directory each.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from bizmsg.testing import Sandbox

ROOT = Path(__file__).parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(?P<indent>\s*)```python\s*$")
_MARKER = re.compile(r"^\s*<!--\s*not run:\s*(?P<why>.*?)\s*(?:;\s*needs:\s*(?P<needs>[\w ,]+))?"
                     r"\s*-->\s*$")
#: A block that is a module of its own, named in its first line (``# tasks.py``).
_MODULE = re.compile(r"^# (?P<name>\w+)\.py\n")
#: A top-level await (a statement that starts at the block's first column).
_ASYNC = re.compile(r"^(?:await |async with |async for |[\w.]+\s*=\s*await )", re.M)

#: The names a block may use without defining them: the imports and the declaration that give
#: each its type for the check.
NEEDS: dict[str, tuple[tuple[str, ...], str]] = {
    "bizmsg": (("import bizmsg",), ""),
    "asyncio": (("import asyncio",), ""),
    "json": (("import json",), ""),
    "client": (("import bizmsg", "from typing import cast"),
               'client = cast("bizmsg.Client", None)'),
    "aclient": (("import bizmsg", "from typing import cast"),
                'aclient = cast("bizmsg.AsyncClient", None)'),
    "sandbox": (("from bizmsg.testing import Sandbox", "from typing import cast"),
                'sandbox = cast("Sandbox", None)'),
    "rows": ((), 'rows: list[dict[str, str]] = []'),
    "customers": ((), "class Customer:\n    phone: str = ''\n\n\ncustomers = [Customer()]"),
    "sender": ((), 'sender = "8613900000000"'),
    "disconnected": ((), 'disconnected = "8613900000001"'),
    "to": ((), 'to = "8613800138000"'),
    "template": (("import bizmsg",),
                 'template = bizmsg.Template(name="t", parameters=[], language="en")'),
    "order": ((), "class Order:\n    id: str = 'A-1042'\n\n\norder = Order()"),
    "display": ((), "def display(*objects: object) -> None: ..."),
    "token_cache": ((), "class TokenCache:\n    def get_or_refresh(self) -> str: ...\n\n\n"
                        "token_cache = TokenCache()"),
    "store": (("from typing import Any",), "async def store(items: list[Any]) -> None: ..."),
    "notify_customer": (("import bizmsg",),
                        "def notify_customer(client: bizmsg.Client, sender: str, *, "
                        "order_id: str) -> None: ..."),
}


@dataclass(frozen=True)
class Block:
    document: Path
    line: int
    code: str
    not_run: str | None
    needs: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"

    @property
    def is_async(self) -> bool:
        return bool(_ASYNC.search(self.code))

    def source(self, for_check: bool) -> str:
        """The block as a module; for the check, what it needs is imported first (a module,
        or a name from :meth:`declarations`, the module ``needs_module`` it is written to)."""
        head: list[str] = []
        if for_check:
            modules = [name for name in self.needs if not NEEDS[name][1]]
            names = [name for name in self.needs if NEEDS[name][1]]
            head = [NEEDS[name][0][0] for name in modules
                    if NEEDS[name][0][0] not in self.code.splitlines()]
            if names:
                head.append(f"from {self.needs_module} import {', '.join(names)}")
            head += ["", ""] if head else []
        body = self.code
        if self.is_async:
            body = "async def main() -> None:\n" + textwrap.indent(body, "    ") + "\n"
            if not for_check:
                body = "import asyncio\n\n" + body + "\nasyncio.run(main())\n"
        return "\n".join(head) + body

    @property
    def needs_module(self) -> str:
        return f"needs_{self.document.stem.replace('-', '_')}_{self.line}"

    def declarations(self) -> str:
        """The module that declares, with its type, each name the block needs."""
        imports: list[str] = []
        declarations: list[str] = []
        for name in self.needs:
            if name not in NEEDS:
                pytest.fail(f"{self.name} needs {name!r}: declare it in NEEDS")
            more, declaration = NEEDS[name]
            if declaration:
                imports += [line for line in more if line not in imports]
                declarations.append(declaration)
        return "\n".join([*imports, "", "", *declarations]) + "\n"


def blocks() -> list[Block]:
    found: list[Block] = []
    for document in DOCUMENTS:
        lines = document.read_text(encoding="utf-8").splitlines()
        index = 0
        while index < len(lines):
            fence = _FENCE.match(lines[index])
            if fence is None:
                index += 1
                continue
            indent = fence.group("indent")
            end = index + 1
            while lines[end].rstrip() != indent + "```":
                end += 1
            code = textwrap.dedent("\n".join(lines[index + 1:end])) + "\n"
            marker = _MARKER.match(lines[index - 1]) if index else None
            needs = marker.group("needs") if marker and marker.group("needs") else ""
            found.append(Block(document, index + 1, code, marker.group("why") if marker else None,
                               tuple(n.strip() for n in needs.split(",") if n.strip())))
            index = end + 1
    return found


BLOCKS = blocks()
RUNNABLE = [block for block in BLOCKS if block.not_run is None]


def test_the_documents_have_code_blocks_and_each_is_accounted_for() -> None:
    assert len(BLOCKS) >= 30
    assert len(RUNNABLE) >= 12
    for block in BLOCKS:
        if block.not_run is not None:
            assert block.not_run, f"{block.name}: say why it cannot run alone"
        else:
            assert not block.needs, f"{block.name}: a block that runs defines what it uses"


def test_every_block_type_checks_under_pyright_strict(tmp_path: Path) -> None:
    pyright = shutil.which("pyright") or str(Path(sys.executable).parent / "pyright")
    if not Path(pyright).exists():
        pytest.skip("pyright is not installed")
    files: dict[str, Block] = {}
    for number, block in enumerate(BLOCKS):
        path = tmp_path / f"block_{number:02d}.py"
        path.write_text(block.source(for_check=True), encoding="utf-8")
        files[str(path)] = block
        # A block that starts `# tasks.py` is that module, which another block may import.
        module = _MODULE.match(block.code)
        if module is not None:
            (tmp_path / f"{module.group('name')}.py").write_text(block.code, encoding="utf-8")
        declarations = tmp_path / f"{block.needs_module}.py"
        declarations.write_text(block.declarations(), encoding="utf-8")
        files[str(declarations)] = block
    (tmp_path / "pyrightconfig.json").write_text(json.dumps({
        "typeCheckingMode": "strict", "pythonVersion": "3.10",
        "extraPaths": [str(ROOT / "python")],
        # A document's block shows one use: a name it defines for the reader (a result, a
        # page) is not always used again in it.
        "reportUnusedVariable": "none",
        # Celery ships no type information; its own types are still inferred from its source.
        "reportMissingTypeStubs": "none",
    }))
    done = subprocess.run([pyright, "--outputjson", "--pythonpath", sys.executable],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    report = json.loads(done.stdout)
    problems = [
        f"{files[d['file']].name} (+{d['range']['start']['line'] + 1}, as checked): "
        f"{d['message']}"
        for d in report["generalDiagnostics"] if d["severity"] == "error"
    ]
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def documents_sandbox() -> object:
    """A sandbox whose first tenant owns the number the documents send from."""
    data = {"tenants": {"acme": [{
        "bizAccountId": "100000000000001", "name": "Acme Support",
        "chatBusinessManagerMessagingLimit": "TIER_10K",
        "businessPhoneNumbers": [
            {"phoneNumberId": "200000000000001", "displayPhoneNumber": "+86 139 0000 0000",
             "status": "CONNECTED", "throughput": "STANDARD", "qualityRating": "GREEN"},
        ]}]}}
    with Sandbox(seed_data=data) as sandbox:
        yield sandbox


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda block: block.name)
def test_a_block_that_can_run_alone_runs(block: Block, documents_sandbox: Sandbox,
                                         tmp_path: Path) -> None:
    script = tmp_path / "block.py"
    script.write_text(block.source(for_check=False), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BIZMSG_")}
    env.update(BIZMSG_BASE_URL=documents_sandbox.base_url, BIZMSG_TOKEN=documents_sandbox.token,
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "python"),
                                                        env.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 0, f"{block.name}:\n{done.stderr}"
