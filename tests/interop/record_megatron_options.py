#!/usr/bin/env python3
"""Record Megatron-LM's command-line options by running its own argument parser (by hand).

    PYTHONPATH=TREE python record_megatron_options.py --tree TREE --tag TAG --commit SHA -o FILE

TREE is a checkout of Megatron-LM at TAG (for instance `git archive core_v0.16.1 megatron |
tar -x -C TREE`). The script calls megatron.training.arguments.add_megatron_arguments on a
fresh argparse parser, exactly as its parse_args() does, and writes every option it defines:
its names, destination, whether it takes a value (and how many), the value's type, its
choices and default. Part of these options are generated from dataclasses
(ArgumentGroupFactory), so they cannot be read off the source; this records what the parser
really accepts.

megatron/training is not in the megatron-core wheel, so CI reads this file
(tests/interop/check_megatron.py) and does not need the tree.
"""

from __future__ import annotations

import argparse
import enum
import json
import os
import sys


def jsonable(value):
    """A default as JSON, or its repr as a string when JSON cannot hold it."""
    if isinstance(value, enum.Enum):
        return value.name
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(
        v is None or isinstance(v, (bool, int, float, str)) for v in value
    ):
        return list(value)
    return {"repr": repr(value)}


def type_name(t) -> str | None:
    if t is None:
        return None
    if t in (int, float, str):
        return t.__name__
    if isinstance(t, type) and issubclass(t, enum.Enum):
        return "enum:" + ",".join(m.name for m in t)
    return "callable:" + getattr(t, "__name__", repr(t))


def action_kind(a: argparse.Action) -> str:
    for kind, cls in (
        ("store_true", argparse._StoreTrueAction),
        ("store_false", argparse._StoreFalseAction),
        ("store_const", argparse._StoreConstAction),
        ("append", argparse._AppendAction),
        ("count", argparse._CountAction),
        ("help", argparse._HelpAction),
        ("store", argparse._StoreAction),
    ):
        if isinstance(a, cls):
            return kind
    return "other:" + type(a).__name__


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", required=True, help="Megatron-LM checkout at --tag")
    ap.add_argument("--tag", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    sys.path.insert(0, os.path.abspath(a.tree))
    from megatron.training.arguments import add_megatron_arguments

    parser = argparse.ArgumentParser(description="Megatron-LM Arguments", allow_abbrev=False)
    parser = add_megatron_arguments(parser)
    options = {}
    for act in parser._actions:
        if not act.option_strings:
            continue
        entry = {
            "names": list(act.option_strings),
            "dest": act.dest,
            "action": action_kind(act),
            "nargs": act.nargs if act.nargs is None or isinstance(act.nargs, (int, str)) else str(act.nargs),
            "type": type_name(act.type),
            "choices": [jsonable(c) for c in act.choices] if act.choices is not None else None,
            "default": jsonable(act.default),
        }
        if isinstance(act, argparse._StoreConstAction):
            entry["const"] = jsonable(act.const)
        for name in act.option_strings:
            options[name] = entry
    out = {
        "source": "Megatron-LM megatron/training/arguments.py add_megatron_arguments(), run by "
        "tests/interop/record_megatron_options.py",
        "tag": a.tag,
        "commit": a.commit,
        "options": dict(sorted(options.items())),
    }
    tmp = a.output + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, a.output)
    print(f"{len(options)} option names of Megatron-LM {a.tag} ({a.commit[:12]}) -> {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
