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

Usage: check_includes.py [SRC_DIR]   (default: the src/ beside this script)
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
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def folder_of(relative: Path) -> str:
    return relative.parts[0] if len(relative.parts) > 1 else ""


def main() -> int:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "src"
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

    if problems:
        print("\n".join(problems))
        print(f"{len(problems)} include problem(s) in {src}")
        return 1
    for folder in sorted(counts, key=lambda f: (-FLOORS[f], f)):
        files_count, includes_count = counts[folder]
        print(f"{folder + '/':12} floor {FLOORS[folder]}: {files_count:3} files, {includes_count:3} includes of src/, none upward")
    print(f"no include runs up a layer and no include loop in {src}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
