"""Subcommands of the `harness` CLI.

Each module here is one subcommand and defines:
    HELP: str                      one line for `harness --help`
    add_arguments(parser) -> None  its flags
    run(args) -> int               the work; raise harness.core.errors.UserError for user mistakes

Modules import only the standard library and light project modules at the top level (torch,
transformers, vllm are imported inside `run`), so `harness --help` stays fast and works without
the heavy extras. The CLI discovers the modules by name; adding a file adds a subcommand. A module
whose name starts with "_" is no subcommand but a part of one (_eval_options.py: the option groups
of `harness eval`, which `harness doctor` shares).
"""
