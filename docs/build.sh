#!/usr/bin/env bash
# Builds the documentation site into site/ with `mkdocs build --strict`: a broken link, a
# missing anchor or an unresolved API reference fails the build (non-zero exit).
#
# The toolchain is pinned in docs/requirements.txt and installed into the current Python
# environment (use a virtualenv) when a package is missing or at another version. The API
# reference is read statically from python/bizmsg (docstrings and _native.pyi), so the Rust
# extension does not have to be built.
#
#   bash docs/build.sh              # from anywhere; PYTHON=... picks the interpreter
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-$(command -v python || command -v python3)}"

# Exit status 1 when a pinned package is missing or at another version.
if ! "$PYTHON" - docs/requirements.txt <<'CHECK'
import sys
from importlib.metadata import PackageNotFoundError, version

stale = []
for line in open(sys.argv[1], encoding="utf-8"):
    requirement = line.split("#", 1)[0].strip()
    if not requirement:
        continue
    name, _, pinned = requirement.partition("==")
    try:
        if version(name.strip()) != pinned.strip():
            stale.append(requirement)
    except PackageNotFoundError:
        stale.append(requirement)
if stale:
    print("docs/build.sh: installing " + ", ".join(stale), file=sys.stderr)
    sys.exit(1)
CHECK
then
    "$PYTHON" -m pip install --quiet --disable-pip-version-check -r docs/requirements.txt
fi

# Material for MkDocs prints a banner about MkDocs 2.0 on every build; it is not a warning of
# this site.
export NO_MKDOCS_2_WARNING=1
"$PYTHON" -m mkdocs build --strict --site-dir site
