"""The minimum Rust version, said the same everywhere and true (called by .ci/wheels).

Cargo.toml's ``rust-version`` must be at least the newest ``rust-version`` that a locked
dependency of the extension declares (what cargo enforces on a build from the sdist, which
ships Cargo.lock), and the build backend's error message and the docs must say the same
version.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path


def version(text: str) -> tuple[int, ...]:
    parts = [int(part) for part in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def main() -> None:
    root = Path(__file__).resolve().parent.parent
    declared = tomllib.loads((root / "Cargo.toml").read_text())["package"]["rust-version"]

    metadata = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked", "--features", "python",
         "--manifest-path", str(root / "Cargo.toml")],
        capture_output=True, text=True, check=True).stdout)
    packages = {p["id"]: p for p in metadata["packages"]}
    nodes = {n["id"]: n for n in metadata["resolve"]["nodes"]}
    # What a user's build compiles: normal and build dependencies, never dev-dependencies.
    seen: set[str] = set()
    todo = [metadata["resolve"]["root"]]
    while todo:
        node = nodes[todo.pop()]
        if node["id"] in seen:
            continue
        seen.add(node["id"])
        for dep in node["deps"]:
            if any(kind["kind"] in (None, "build") for kind in dep["dep_kinds"]):
                todo.append(dep["pkg"])
    needed = max((version(packages[i]["rust_version"]), packages[i]["name"])
                 for i in seen if packages[i].get("rust_version"))
    if version(declared) < needed[0]:
        sys.exit(f"Cargo.toml says rust-version {declared}, but the locked {needed[1]} needs "
                 f"{'.'.join(map(str, needed[0]))}")

    said = {
        "build_backend/bizmsg_build.py": rf'RUST_VERSION = "{re.escape(declared)}"',
        "docs/installing.md": rf"Rust {re.escape(declared)} or newer",
        "docs/getting-started.md": rf"Rust toolchain \({re.escape(declared)}\s+or newer",
    }
    for path, pattern in said.items():
        if not re.search(pattern, (root / path).read_text()):
            sys.exit(f"{path} does not say Rust {declared} (Cargo.toml's rust-version)")
    print(f"rust-version {declared}: Cargo.toml, the build backend and the docs agree; the "
          f"newest any locked dependency needs is {'.'.join(map(str, needed[0]))} ({needed[1]})")


if __name__ == "__main__":
    main()
