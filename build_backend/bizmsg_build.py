"""bizmsg's PEP 517 build backend: maturin's, unchanged, with one addition. When a build from
source fails (no Rust toolchain, one older than Cargo.toml's ``rust-version``, no C compiler for
the C that our dependencies compile), the error ends with what a build needs and where the
install page is, instead of only a compiler's last words. pip shows it under the build's output.

Named in pyproject.toml's ``[build-system]`` (``backend-path``), shipped in the sdist.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import maturin

# Kept in step with Cargo.toml's rust-version and the docs (.ci/wheels checks all three).
RUST_VERSION = "1.89"

HELP = f"""
bizmsg could not be built from source (the error is above). Building it needs
- a Rust toolchain, {RUST_VERSION} or newer (https://rustup.rs; `rustup update` for an old one),
- a C compiler (gcc or clang; on Windows, Visual Studio's C++ build tools).
Most platforms need neither: an up-to-date pip (`python -m pip install --upgrade pip`) installs
a ready wheel on Linux x86_64 and aarch64 (glibc 2.17+ or musl 1.2+), macOS x86_64 and arm64,
and Windows x64 and arm64. Which platforms have wheels, and what to do on one that has none:
the "Installing" page of bizmsg's documentation (docs/installing.md in this source).
"""

Hook = TypeVar("Hook", bound=Callable[..., Any])


def _explained(hook: Hook) -> Hook:
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return hook(*args, **kwargs)
        except SystemExit as stop:
            if stop.code not in (0, None):
                sys.stderr.write(HELP)
            raise
        except Exception:
            sys.stderr.write(HELP)
            raise

    return run  # type: ignore[return-value]


get_requires_for_build_wheel = maturin.get_requires_for_build_wheel
get_requires_for_build_sdist = maturin.get_requires_for_build_sdist
get_requires_for_build_editable = maturin.get_requires_for_build_editable
prepare_metadata_for_build_wheel = _explained(maturin.prepare_metadata_for_build_wheel)
prepare_metadata_for_build_editable = _explained(maturin.prepare_metadata_for_build_editable)
build_wheel = _explained(maturin.build_wheel)
build_editable = _explained(maturin.build_editable)
build_sdist = maturin.build_sdist
