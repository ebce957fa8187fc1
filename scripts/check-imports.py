#!/usr/bin/env python3
"""Every module a target imports is one it declares, and every one it declares it imports.

SwiftPM lets a target import a module that reaches it only through another target (its
`--explicit-target-dependency-import-check` accepts transitive dependencies), so the layering
in Package.swift could say one thing and the code do another. This compares, per target, the
`import` lines of its Swift sources with its declared direct dependencies:

- an import of one of the package's targets, or of a product of a package dependency, that
  the target does not declare is an error;
- a declared dependency that no source imports is an error, except an executable a test
  target declares to have it built, and C targets, which carry their libraries' link flags.

Usage: scripts/check-imports.py [path to dump-package JSON]  (default: runs `swift package dump-package`)
Exit 0 when they agree, 1 with one line per difference.
"""
import json
import os
import re
import subprocess
import sys

IMPORT = re.compile(r'^\s*(?:@testable\s+|@_exported\s+|@preconcurrency\s+)*import\s+(?:(?:struct|class|enum|func|var|let|protocol|typealias)\s+)?([A-Za-z_][A-Za-z0-9_]*)', re.M)


def manifest(path):
    if path:
        with open(path) as f:
            return json.load(f)
    out = subprocess.run(["swift", "package", "dump-package"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def sources(target):
    if target.get("path"):
        root = target["path"]
    else:
        root = os.path.join("Tests" if target["type"] == "test" else "Sources", target["name"])
    for base, _, files in os.walk(root):
        for name in files:
            if name.endswith(".swift"):
                yield os.path.join(base, name)


def declared(target):
    names = set()
    for dep in target["dependencies"]:
        if "byName" in dep:
            names.add(dep["byName"][0])
        elif "target" in dep:
            names.add(dep["target"][0])
        elif "product" in dep:
            names.add(dep["product"][0])
    return names


def main():
    pkg = manifest(sys.argv[1] if len(sys.argv) > 1 else None)
    targets = {t["name"]: t for t in pkg["targets"]}
    products = {d["product"][0] for t in pkg["targets"] for d in t["dependencies"] if "product" in d}
    known = set(targets) | products
    problems = []
    for t in pkg["targets"]:
        if t["type"] in ("system", "binary", "plugin", "macro"):
            continue
        files = list(sources(t))
        if not files:
            continue
        imported = {}
        for path in files:
            with open(path, encoding="utf-8") as f:
                for module in IMPORT.findall(f.read()):
                    if module in known and module != t["name"]:
                        imported.setdefault(module, path)
        have = declared(t)
        for module, path in sorted(imported.items()):
            if module not in have:
                problems.append(f"{t['name']}: imports {module} ({path}) but does not declare it in Package.swift")
        for module in sorted(have - set(imported)):
            dep = targets.get(module)
            if dep is not None and (dep["type"] == "executable" and t["type"] == "test" or dep["type"] == "system"):
                continue
            problems.append(f"{t['name']}: declares {module} in Package.swift but no source imports it")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} difference(s) between imports and declared dependencies", file=sys.stderr)
        return 1
    print(f"imports match declared dependencies in {sum(1 for t in pkg['targets'] if t['type'] not in ('system',))} targets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
