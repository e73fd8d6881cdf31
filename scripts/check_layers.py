#!/usr/bin/env python3
"""check_layers.py — every include under src/ points to its own folder or one below it.

The layers, bottom to top (docs/architecture.md): base, ops, progress, transport, epochs,
engine, mpi. Prints each include that runs up and exits 1 if there is one.
"""
import pathlib
import re
import sys

ORDER = ["base", "ops", "progress", "transport", "epochs", "engine", "mpi"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def main() -> int:
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent / "src")
    bad = []
    for f in sorted(src.rglob("*")):
        if f.suffix not in {".c", ".cpp", ".h", ".hpp"}:
            continue
        layer = f.relative_to(src).parts[0]
        if layer not in ORDER:
            bad.append(f"{f}: folder {layer} is not a layer")
            continue
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if m and m.group(1) in ORDER and ORDER.index(m.group(1)) > ORDER.index(layer):
                bad.append(f"{f}:{n}: {layer} includes {m.group(1)} (above it): {line.strip()}")
    for b in bad:
        print(b)
    print(f"check_layers: {len(bad)} include(s) running up" if bad else "check_layers: every include points down")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
