#!/usr/bin/env bash
# The type stub of the Python package's extension, python/src/mtsarray/_mtsarray.pyi:
# nanobind's stubgen run on the extension installed in the venv (the nb::sig
# signatures and docstrings of python/extension/module.cpp). The stub is
# committed and packaged beside the package's Python sources, with py.typed.
#
# Usage: bash scripts/python_stubs.sh           write the stub
#        bash scripts/python_stubs.sh --check   fail when the committed one differs
# The package must be installed in the venv (scripts/test.sh installs the
# wheel it builds; or `pip install ./python`), with the nanobind pinned in
# setup.sh and python/pyproject.toml, which renders the signatures.
set -euo pipefail

# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

STUB="$REPO_ROOT/python/src/mtsarray/_mtsarray.pyi"
mode="${1:-write}"
case "$mode" in
    write | --check) ;;
    *) die "usage: $0 [--check]" ;;
esac

generated="$(mktemp "${TMPDIR:-/tmp}/mtsarray-stub.XXXXXX.pyi")"
trap 'rm -f "$generated"' EXIT
# The extension is imported alone, as the top-level module _mtsarray from the
# installed package's folder: importing the package would first rename its
# classes' module to "mtsarray", and stubgen would then import them from
# there instead of writing them out. From /, so that python/src is not seen.
package="$(cd / && "$VENV_PYTHON" -c \
    'import importlib.util; print(importlib.util.find_spec("mtsarray").submodule_search_locations[0])')" ||
    die "the mtsarray package is not installed in $VENV_DIR"
(cd / && "$VENV_PYTHON" -m nanobind.stubgen --quiet --include-private \
    -i "$package" -m _mtsarray -o "$generated")

if [[ "$mode" == --check ]]; then
    if ! diff -u "$STUB" "$generated"; then
        die "python/src/mtsarray/_mtsarray.pyi differs from the extension's stub: run 'bash scripts/python_stubs.sh' and commit it"
    fi
    log "the committed type stub matches the extension"
else
    cp "$generated" "$STUB"
    log "wrote $STUB"
fi
