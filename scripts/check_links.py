#!/usr/bin/env python3
"""Fails when a target includes a header of a library it does not link.

The layer table says which folder may use which; the link graph is where CMake states
it. A header belongs to the targets that compile its .cc (or, for a header alone, to
the libraries with sources in its folder). A target may include its own headers and
those of the libraries it links, directly or through their PUBLIC links. The include
roots (cmake/include_roots.cmake) make the compiler refuse a header of an unlinked
folder; this check is finer, a header belonging to the target that compiles its .cc,
and its message names the link to add.

usage: check_links.py BUILD_DIR/target_graph.tsv REPO_ROOT
(cmake/target_graph.cmake writes the graph; tests/lint/links_bad is a tree it rejects.)
"""
import os
import re
import sys
from collections import defaultdict

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SOURCE_SUFFIXES = (".cc", ".cpp", ".cu")
HEADER_SUFFIXES = (".h", ".hpp", ".cuh")
LIBRARY_TYPES = {"STATIC_LIBRARY", "SHARED_LIBRARY", "MODULE_LIBRARY", "OBJECT_LIBRARY"}
# Generated protobuf headers are included by their proto path.
GENERATED = {"baton/": "baton_proto"}


def split_list(value):
    return [v for v in value.split(";") if v]


def names_in(entries, known, public_only):
    """Targets named by link entries; with public_only, not those of $<LINK_ONLY:...>
    (a static library's PRIVATE links, which give its users no headers)."""
    out = set()
    for entry in entries:
        if public_only and entry.startswith("$<LINK_ONLY:"):
            continue
        for name in re.findall(r"[A-Za-z0-9_.+-]+", entry):
            if name in known:
                out.add(name)
    return out


def main() -> int:
    graph_path, root = sys.argv[1], os.path.realpath(sys.argv[2])
    targets = {}
    for line in open(graph_path, encoding="utf-8"):
        name, kind, src_dir, sources, links, interface = line.rstrip("\n").split("\t")
        files = []
        src_dir = os.path.join(root, src_dir)  # as it is when absolute
        for s in split_list(sources):
            path = os.path.realpath(s if os.path.isabs(s) else os.path.join(src_dir, s))
            if path.startswith(root + os.sep) and os.path.exists(path):
                files.append(os.path.relpath(path, root))
        targets[name] = {"kind": kind, "files": files, "links": split_list(links),
                         "interface": split_list(interface)}
    known = set(targets)

    # Who owns each header: the targets compiling its .cc, else the libraries with sources
    # in its folder.
    owners = defaultdict(set)
    folder_libraries = defaultdict(set)
    for name, t in targets.items():
        for f in t["files"]:
            stem, _ = os.path.splitext(f)
            for suffix in HEADER_SUFFIXES:
                owners[stem + suffix].add(name)
            if t["kind"] in LIBRARY_TYPES:
                folder_libraries[os.path.dirname(f)].add(name)

    def owners_of(header):
        for prefix, library in GENERATED.items():
            if header.startswith(prefix):
                return {library}
        if header in owners:
            return owners[header]
        return folder_libraries.get(os.path.dirname(header), set())

    public = {n: names_in(t["interface"], known, True) for n, t in targets.items()}

    def may_use(name, public_only=False):
        seen, todo = set(), list(names_in(targets[name]["links" if not public_only else "interface"],
                                          known, public_only))
        while todo:
            d = todo.pop()
            if d not in seen:
                seen.add(d)
                todo.extend(public[d])
        return seen

    errors = []
    checked = 0
    for name, t in sorted(targets.items()):
        headers = set()
        if t["kind"] in LIBRARY_TYPES:
            headers = {h for h, o in owners.items() if name in o and len(o) == 1 and
                       os.path.exists(os.path.join(root, h))}
        for f in sorted(set(t["files"]) | headers):
            # A library's header is compiled by its users too, who see only its PUBLIC links.
            allowed = may_use(name, public_only=f in headers) | {name}
            checked += 1
            with open(os.path.join(root, f), encoding="utf-8", errors="replace") as text:
                for lineno, line in enumerate(text, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    own = owners_of(m.group(1))
                    if own and not own & allowed:
                        errors.append(
                            f"{f}:{lineno}: {name} includes \"{m.group(1)}\" of "
                            f"{' or '.join(sorted(own))}, which it does not link: add it to "
                            f"target_link_libraries({name} ...), PUBLIC where a header of "
                            f"{name}'s includes it")
    for e in errors:
        print(e)
    print(f"check_links: {len(targets)} targets, {checked} files checked, {len(errors)} "
          f"includes without a link")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
