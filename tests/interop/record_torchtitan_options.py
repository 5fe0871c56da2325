#!/usr/bin/env python3
"""Record torchtitan's command-line options and its configs' values (by hand).

    python record_torchtitan_options.py -o interop/data/torchtitan_options_0.3.0.json

Run with the interop venv's python (scripts/interop.sh installs torchtitan there). For each of
torchtitan's configs that paci has a preset for (Llama 3 8B and 70B, Qwen3-30B-A3B, DeepSeek-V3
without MTP), it loads the
config exactly as ConfigManager.parse_args does (--module MODULE --config NAME), builds the argument parser tyro
builds from it (tyro.extras.get_parser, the parser tyro.cli runs) and writes:
  - every option: its names (the --no- form of a switch too), whether it takes a value and how
    many, its choices and tyro's metavar (INT, FLOAT|INT, STR, {None}|INT, ...);
  - the subcommands (activation-checkpoint:none|selective|full|memory-budget) with theirs;
  - per config, the value each option has when the command line leaves it alone, and which
    activation-checkpoint subcommand the config selects.
paci plan --from-torchtitan reads these (embedded at build time): it checks the option names and
values a user gives against what torchtitan's own parser accepts, and takes the config's values
for what the command line does not set.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import os
import sys
import warnings

# llama3_405b is left out: its config builds torchao's Float8Linear converter when it is loaded (it
# fails without torchao), and paci refuses it for torchtitan (bf16 only; interop/torchtitan.cpp).
# The module each config is loaded from (--module), by config name.
CONFIGS = {"llama3_8b": "llama3", "llama3_70b": "llama3", "qwen3_30b_a3b": "qwen3",
           "deepseek_v3_671b": "deepseek_v3"}


def jsonable(value):
    if isinstance(value, enum.Enum):
        return value.name
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(
        v is None or isinstance(v, (bool, int, float, str)) for v in value
    ):
        return list(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, (list, tuple)) for v in value):
        return [jsonable(v) for v in value]
    return {"repr": repr(value)}


def option_entry(act: argparse.Action) -> dict:
    flag = type(act).__name__ == "BooleanOptionalAction"
    return {
        "names": list(act.option_strings),
        "dest": act.dest,
        "kind": "switch" if flag else "value",
        "nargs": act.nargs if act.nargs is None or isinstance(act.nargs, (int, str)) else str(act.nargs),
        "choices": [jsonable(c) for c in act.choices] if act.choices is not None else None,
        "metavar": act.metavar if isinstance(act.metavar, str) else None,
    }


def options_of(parser: argparse.ArgumentParser) -> tuple[dict, dict]:
    options, subcommands = {}, {}
    for act in parser._actions:
        if type(act).__name__ == "_SubParsersAction":  # tyro vendors its own argparse
            for name, sub in act.choices.items():
                sub_options, _ = options_of(sub)
                subcommands[name] = {"options": sub_options}
            continue
        if not act.option_strings or act.option_strings[0] in ("-h", "--help"):
            continue
        entry = option_entry(act)
        options[act.option_strings[0]] = entry
    return dict(sorted(options.items())), subcommands


def value_at(config, dest: str):
    """The config's value for a tyro dest ('parallelism.tensor-parallel-degree')."""
    node = config
    for part in dest.split("."):
        name = part.replace("-", "_")
        if isinstance(node, (list, tuple)) and name.isdigit():
            node = node[int(name)]
        elif dataclasses.is_dataclass(node) and hasattr(node, name):
            node = getattr(node, name)
        else:
            return {"missing": dest}
    return jsonable(node)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    import torchtitan
    import tyro
    import tyro.extras
    from importlib.metadata import version

    from torchtitan.config.manager import ConfigManager, custom_registry

    shared_options, shared_subcommands, configs = None, None, {}
    first = next(iter(CONFIGS))
    for name, module in CONFIGS.items():
        manager = ConfigManager()
        config, _ = manager._load_config(["--module", module, "--config", name])
        parser = tyro.extras.get_parser(type(config), default=config, registry=custom_registry)
        options, subcommands = options_of(parser)
        if shared_options is None:
            shared_options, shared_subcommands = options, subcommands
        elif options != shared_options or subcommands != shared_subcommands:
            print(f"{name}'s options differ from {first}'s: record them apart", file=sys.stderr)
            return 1
        ac = type(config.activation_checkpoint).__qualname__  # FullAC.Config, SelectiveAC.Config, ...
        chosen = None
        for sub in subcommands:
            # the subcommand whose config class the config's value is
            try:
                parsed = tyro.cli(type(config), args=[sub], default=config, registry=custom_registry)
            except SystemExit:  # memory-budget refuses a model that is not compiled
                continue
            if type(parsed.activation_checkpoint).__qualname__ == ac:
                chosen = sub
        if chosen is None:
            print(f"{name}: no subcommand selects {ac}", file=sys.stderr)
            return 1
        model = config.model_spec
        configs[name] = {
            "module": module,
            "values": {o: value_at(config, e["dest"]) for o, e in options.items()},
            "activation_checkpoint": chosen,
            "model": repr(model)[:200],
        }
    out = {
        "source": "torchtitan's tyro parser for ConfigManager's --module MODULE --config NAME, "
        "run by tests/interop/record_torchtitan_options.py",
        "torchtitan": version("torchtitan"),
        "tyro": version("tyro"),
        "options": shared_options,
        "subcommands": shared_subcommands,
        "configs": configs,
    }
    tmp = a.output + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    os.replace(tmp, a.output)
    print(f"{len(shared_options)} options, {len(shared_subcommands)} subcommands, "
          f"{len(configs)} configs of torchtitan {out['torchtitan']} -> {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
