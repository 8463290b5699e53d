#!/usr/bin/env python3
"""Fails when an #include points up the layer table of shared/design/architecture.md.

Each folder may include headers only from itself and from the folders it may use.
usage: check_layers.py REPO_ROOT
"""
import pathlib
import re
import sys

BELOW_SERVICES = ["common", "proto", "kvcache", "kernels", "parallel", "tokenizer", "template",
                  "grammar", "toolcall", "capacity", "model", "engine", "transport", "service"]
WORKERS = ["worker", "prefill_worker", "decode_worker"]
MAY_USE = {
    "common": [],
    "proto": [],
    "kvcache": ["proto", "common"],
    "kernels": ["common"],
    "parallel": ["common"],
    "tokenizer": ["common"],
    "template": ["common"],
    # Constrained decoding: JSON schemas compiled to grammars, and per-step token masks.
    "grammar": ["common"],
    # Tool calls parsed out of generated text, per template family.
    "toolcall": ["common"],
    # Capacity planning in numbers: a model's shape and weight groups, the tensor-parallel
    # split rule, devices and the plan; below model/, and usable by the router.
    "capacity": ["common"],
    "model": ["capacity", "kernels", "parallel", "common"],
    # Writing model files, for `baton synth-model`, tests and benchmarks: nothing that
    # serves a model may use it.
    "modelgen": ["model", "capacity", "kernels", "parallel", "common"],
    "engine": ["kvcache", "model", "capacity", "kernels", "parallel", "tokenizer", "grammar",
               "common"],
    "transport": ["kvcache", "common"],
    "service": ["proto", "common"],
    "routing": ["kvcache", "proto", "common"],
    "dispatch": ["routing", "service", "kvcache", "tokenizer", "grammar", "toolcall", "proto",
                 "common"],
    "frontdoor": ["dispatch", "routing", "service", "kvcache", "template", "tokenizer", "grammar",
                  "toolcall", "capacity", "proto", "common"],
    "router": ["frontdoor", "dispatch", "routing", "service", "kvcache", "template", "tokenizer",
               "grammar", "toolcall", "capacity", "proto", "common"],
    "worker": BELOW_SERVICES,
    "prefill_worker": BELOW_SERVICES + ["worker"],
    "decode_worker": BELOW_SERVICES + ["worker"],
    "tools": BELOW_SERVICES + ["modelgen", "routing", "dispatch", "frontdoor", "router"] + WORKERS,
}
LAYERS = set(MAY_USE)
# Within a layer: the two front doors are siblings, and the gRPC one maps its requests
# onto the OpenAI request model, never the other way round.
FORBIDDEN = [("frontdoor/openai/", "frontdoor/grpc/")]
# Generated protobuf headers are included by their proto path
# ("baton/internal/v1/kv_events.pb.h") but belong to the proto layer.
ALIASES = {"baton": "proto"}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"/]+)/')
SOURCES = {".h", ".hpp", ".cc", ".cpp", ".cu", ".cuh"}


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    errors = []
    checked = 0
    for layer, allowed in MAY_USE.items():
        folder = root / layer
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            if path.suffix not in SOURCES:
                continue
            checked += 1
            for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                rel = path.relative_to(root).as_posix()
                for inside, banned in FORBIDDEN:
                    if rel.startswith(inside) and line.split('"')[1].startswith(banned):
                        errors.append(f"{rel}:{lineno}: '{inside}' may not include '{banned}'")
                target = ALIASES.get(m.group(1), m.group(1))
                if target in LAYERS and target != layer and target not in allowed:
                    errors.append(f"{path.relative_to(root)}:{lineno}: '{layer}' may not include "
                                  f"'{target}/' (allowed: {', '.join(allowed) or 'none'})")
    for e in errors:
        print(e)
    print(f"check_layers: {checked} files checked, {len(errors)} upward includes")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
