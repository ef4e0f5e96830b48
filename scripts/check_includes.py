#!/usr/bin/env python3
"""Checks the include graph of src/ against the layers of the library.

src/ is built in floors; a file includes files of its own floor or of the
floors below it, never above:

    5  api/         the C functions of mtsarray.h and the mts_array_t callbacks
    4  operations/  one file per array operation
    3  core/        Array, Buffer, the registries, the installed allocator
    2  cpu/ gpu/ cuda/ hip/   the backends
    1  base/        the vocabulary: errors, shapes, dtypes, devices, streams,
                    MovePlan, the Backend, Allocator and HostTasks interfaces

Among the backends, cuda/ and hip/ may include gpu/ (the template they
instantiate); no other backend includes another. No two files include each
other, directly or through a loop.

No name is used on two floors: a reader takes `#include "base/x.hpp"` beside
a `cpu/x.cpp` for a call up a layer. A header and its source share their
name (x.hpp, x.cpp) in one folder; the backends of floor 2 share the names
of the operations they all implement (fill, copy, ...). The one exception
across floors is an array operation's own name (OPERATION_NAMES): its file in
operations/ and the backends' files of the same operation.

Usage: check_includes.py [SRC_DIR]   (default: the src/ beside this script)
       check_includes.py --self-test (the checks against small made-up trees)
Prints every violation and exits 1 if there is one; prints the counts by
folder otherwise.
"""

import re
import sys
from collections import defaultdict
from pathlib import Path

FLOORS = {"api": 5, "operations": 4, "core": 3, "cpu": 2, "gpu": 2, "cuda": 2, "hip": 2, "base": 1}
# backends that may include another backend's folder
BACKEND_INCLUDES = {"cuda": {"gpu"}, "hip": {"gpu"}, "cpu": set(), "gpu": set()}
SOURCE_SUFFIXES = {".cpp", ".hpp", ".cu", ".hip", ".h"}
# array operations: one file in operations/, and one of the same name in each
# backend folder that implements the operation (DESIGN.md: the same file
# names in every backend)
OPERATION_NAMES = {"copy", "fill", "move_data", "strided_copy"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def folder_of(relative: Path) -> str:
    return relative.parts[0] if len(relative.parts) > 1 else ""


def same_name_problems(files, src):
    """Names (without the suffix) used on two floors or more."""
    floors_of = defaultdict(lambda: defaultdict(list))  # name -> floor -> files
    for path in files:
        relative = path.relative_to(src)
        folder = folder_of(relative)
        if folder in FLOORS:
            floors_of[path.stem][FLOORS[folder]].append(str(relative))
    problems = []
    for name, floors in sorted(floors_of.items()):
        if len(floors) > 1 and name not in OPERATION_NAMES:
            where = ", ".join(sorted(f for files_of in floors.values() for f in files_of))
            problems.append(f"'{name}' names files on {len(floors)} floors ({where}): give each a name of its own")
    return problems


def check(src: Path) -> int:
    files = sorted(p for p in src.rglob("*") if p.suffix in SOURCE_SUFFIXES and p.is_file())
    graph = {}
    problems = []
    counts = defaultdict(lambda: [0, 0])  # folder -> [files, includes of src/ files]
    for path in files:
        relative = path.relative_to(src)
        folder = folder_of(relative)
        if folder not in FLOORS:
            problems.append(f"{relative}: not in a layer folder ({', '.join(FLOORS)})")
            continue
        counts[folder][0] += 1
        edges = []
        for included in INCLUDE.findall(path.read_text(encoding="utf-8")):
            target = src / included
            if not target.is_file():
                continue  # public headers (mtsarray.h) and generated ones (mtsarray/config.h)
            target_folder = folder_of(Path(included))
            counts[folder][1] += 1
            edges.append(Path(included))
            if target_folder not in FLOORS:
                problems.append(f"{relative}: includes {included}, which is not in a layer folder")
            elif FLOORS[target_folder] > FLOORS[folder]:
                problems.append(f"{relative} (floor {FLOORS[folder]}, {folder}/) includes {included} "
                                f"(floor {FLOORS[target_folder]}, {target_folder}/): an include up a layer")
            elif (FLOORS[target_folder] == 2 and FLOORS[folder] == 2 and target_folder != folder
                  and target_folder not in BACKEND_INCLUDES[folder]):
                problems.append(f"{relative} includes {included}: {folder}/ may not include {target_folder}/")
        graph[relative] = edges

    # include loops, by depth-first search over the file graph
    state = {}  # file -> 1 on the current path, 2 done
    def visit(node, path):
        state[node] = 1
        path.append(node)
        for target in graph.get(node, []):
            if state.get(target) == 1:
                loop = path[path.index(target):] + [target]
                problems.append("include loop: " + " -> ".join(str(p) for p in loop))
            elif target not in state:
                visit(target, path)
        path.pop()
        state[node] = 2
    for node in graph:
        if node not in state:
            visit(node, [])
    problems += same_name_problems(files, src)

    if problems:
        print("\n".join(problems))
        print(f"{len(problems)} include problem(s) in {src}")
        return 1
    for folder in sorted(counts, key=lambda f: (-FLOORS[f], f)):
        files_count, includes_count = counts[folder]
        print(f"{folder + '/':12} floor {FLOORS[folder]}: {files_count:3} files, {includes_count:3} includes of src/, none upward")
    print(f"no include runs up a layer, no include loop and no name on two floors in {src}")
    return 0


def self_test() -> int:
    """Each check against a made-up tree that breaks it, and one that breaks
    none: exits 1 when a check lets its case through."""
    import contextlib
    import io
    import tempfile

    cases = {
        "clean": ({"base/shape.hpp": "", "base/shape.cpp": '#include "base/shape.hpp"',
                   "cpu/fill.hpp": "", "gpu/fill.hpp": "", "operations/copy.cpp": "", "cpu/copy.cpp": ""}, None),
        "up a layer": ({"base/a.hpp": '#include "core/b.hpp"', "core/b.hpp": ""}, "an include up a layer"),
        "across backends": ({"cpu/a.hpp": '#include "gpu/b.hpp"', "gpu/b.hpp": ""}, "cpu/ may not include gpu/"),
        "loop": ({"base/a.hpp": '#include "base/b.hpp"', "base/b.hpp": '#include "base/a.hpp"'}, "include loop"),
        "one name on two floors": ({"base/move_scan.hpp": "", "cpu/move_scan.cpp": ""},
                                   "'move_scan' names files on 2 floors"),
    }
    failures = 0
    for name, (tree, expected) in cases.items():
        with tempfile.TemporaryDirectory() as root:
            for relative, text in tree.items():
                path = Path(root) / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text + "\n", encoding="utf-8")
            output = io.StringIO()
            with contextlib.redirect_stdout(output):
                status = check(Path(root))
        printed = output.getvalue()
        if expected is None and status != 0:
            failures += 1
            print(f"self-test '{name}': a clean tree was refused:\n{printed}")
        elif expected is not None and (status == 0 or expected not in printed):
            failures += 1
            print(f"self-test '{name}': expected a problem saying '{expected}', got:\n{printed}")
    print(f"self-test: {len(cases) - failures} of {len(cases)} cases as expected")
    return 1 if failures else 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    return check(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "src")


if __name__ == "__main__":
    sys.exit(main())
