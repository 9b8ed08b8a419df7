"""``patchlane completion bash|zsh|fish``: a shell completion script, generated from the parser.

Nothing is written by hand: the commands, their actions (``shim new``), options and the choices
of options (``run --tag cpu|gpu``) are read from the one parser ``patchlane`` runs with, so the
script follows every command as it changes. Deprecated spellings are left out, as in ``--help``.
Options that take a value (``--root DIR``) complete file names; the rest complete words.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass, field

from retire.commands import build_parser, docs
from retire.commands.base import Command, ExitCode, emit_text
from retire.core.errors import InputError
from retire.core.project import Project

SHELLS = ("bash", "zsh", "fish")


@dataclass(frozen=True)
class Node:
    """One command path (``""``, ``"shim"``, ``"shim new"``): what may follow it."""

    # sub-command name -> one line of help
    commands: dict[str, str] = field(default_factory=dict)
    # option string -> one line of help
    options: dict[str, str] = field(default_factory=dict)
    # options that take a value
    takes_value: frozenset[str] = frozenset()
    # option -> the values it accepts (one of DYNAMIC: the project's, asked at completion time)
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # what a bare word may also be here: DYNAMIC's kind ("lanes", "shims"), or "" for nothing
    dynamic: str = ""


#: Values only the project knows (its lanes, its shims): the script asks
#: `patchlane completion --values KIND` when it completes one.
DYNAMIC = ("lanes", "shims")


def _values_of(action: argparse.Action) -> str:
    """The kind of project values an argument takes (its metavar says): lanes, shims, or ""."""
    if action.metavar == "LANE" or (action.dest == "lane" and action.option_strings):
        return "lanes"
    if action.metavar == "SHIM" or action.dest == "shim":
        return "shims"
    return ""


def tree(parser: argparse.ArgumentParser, path: str = "") -> dict[str, Node]:
    """Every command path of ``parser`` and what may follow it."""
    nodes: dict[str, Node] = {}
    commands: dict[str, str] = {}
    options: dict[str, str] = {}
    takes_value: set[str] = set()
    choices: dict[str, tuple[str, ...]] = {}
    dynamic = ""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            # _choices_actions: the sub-commands with help, i.e. not the hidden aliases
            for shown in action._choices_actions:
                name = shown.dest
                commands[name] = _one_line(shown.help)
                nodes.update(tree(action.choices[name], f"{path} {name}".strip()))
            continue
        if action.help == argparse.SUPPRESS:
            continue
        if not action.option_strings:
            # a positional with a closed set of values (`completion bash|zsh|fish`, the docs'
            # topics), or the project's lanes or shims
            for choice in action.choices or _topics(action):
                commands[str(choice)] = _one_line(action.help)
            dynamic = dynamic or _values_of(action)
            continue
        for option in action.option_strings:
            options[option] = _one_line(action.help)
            if action.nargs != 0:
                takes_value.add(option)
                if action.choices is not None:
                    choices[option] = tuple(str(choice) for choice in action.choices)
                elif kind := _values_of(action):
                    choices[option] = (f"@{kind}",)
    nodes[path] = Node(commands, options, frozenset(takes_value), choices, dynamic)
    return nodes


def _topics(action: argparse.Action) -> list[str]:
    """The docs' topics, for `patchlane docs TOPIC` (known when the script is made)."""
    if action.metavar != "TOPIC":
        return []

    where = docs.folder()
    return list(docs.topics(where)) if where is not None else []


def _one_line(text: object) -> str:
    words = " ".join(str(text or "").split())
    # %(default)s and friends are argparse's, not a shell's
    return words.replace("%%", "%").replace("'", "")[:100]


def bash(nodes: dict[str, Node], prog: str = "patchlane") -> str:
    """A bash script (bash 4+): ``source <(patchlane completion bash)``."""
    function = f"_{prog}_complete"

    # bash's associative arrays take no empty key: the paths start with the program's name
    def key(path: str, *more: str) -> str:
        return shlex.quote("|".join([f"{prog} {path}".strip(), *more]))

    words = "\n".join(
        f"    [{key(path)}]={shlex.quote(' '.join([*node.commands, *node.options]))}"
        for path, node in sorted(nodes.items())
    )
    values = "\n".join(
        f"    [{key(path)}]={shlex.quote(' ' + ' '.join(sorted(node.takes_value)) + ' ')}"
        for path, node in sorted(nodes.items())
        if node.takes_value
    )
    choices = "\n".join(
        f"    [{key(path, option)}]={shlex.quote(' '.join(values_))}"
        for path, node in sorted(nodes.items())
        for option, values_ in sorted(node.choices.items())
    )
    dynamic = "\n".join(
        f"    [{key(path)}]={shlex.quote(node.dynamic)}"
        for path, node in sorted(nodes.items())
        if node.dynamic
    )
    return f"""# {prog} completion for bash, generated from its parser:
#   source <({prog} completion bash)
declare -A _{prog}_words=(
{words}
)
declare -A _{prog}_values=(
{values}
)
declare -A _{prog}_choices=(
{choices}
)
declare -A _{prog}_dynamic=(
{dynamic}
)
# the project's lanes or shims, asked when they are completed
_{prog}_project_values() {{
    {prog} completion --values "$1" 2>/dev/null
}}
{function}() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" path={prog} i word next
    local skip=0
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        if ((skip)); then skip=0; continue; fi
        if [[ "$word" == -* ]]; then
            [[ "${{_{prog}_values[$path]}}" == *" $word "* ]] && skip=1
            continue
        fi
        next="$path $word"
        [[ -n "${{_{prog}_words[$next]+set}}" ]] && path="$next"
    done
    local prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    if ((COMP_CWORD > 1)) && [[ "${{_{prog}_values[$path]}}" == *" $prev "* ]]; then
        local kind="${{_{prog}_choices[$path|$prev]}}"
        if [[ "$kind" == @* ]]; then
            COMPREPLY=($(compgen -W "$(_{prog}_project_values "${{kind#@}}")" -- "$cur"))
        elif [[ -n "${{_{prog}_choices[$path|$prev]+set}}" ]]; then
            COMPREPLY=($(compgen -W "${{_{prog}_choices[$path|$prev]}}" -- "$cur"))
        else
            # a file or folder: the shell's own completion (complete -o default)
            COMPREPLY=()
        fi
        return 0
    fi
    local more=""
    if [[ -n "${{_{prog}_dynamic[$path]+set}}" && "$cur" != -* ]]; then
        more="$(_{prog}_project_values "${{_{prog}_dynamic[$path]}}")"
    fi
    COMPREPLY=($(compgen -W "${{_{prog}_words[$path]}} $more" -- "$cur"))
}}
complete -o default -F {function} {prog}
"""


def zsh(nodes: dict[str, Node], prog: str = "patchlane") -> str:
    """A zsh script: the bash one through zsh's ``bashcompinit`` (``source <(patchlane completion
    zsh)`` in ``~/.zshrc``, after ``compinit``)."""
    return (
        f"# {prog} completion for zsh, generated from its parser: source <({prog} completion zsh)\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + bash(nodes, prog).split("\n", 2)[2]
    )


def fish(nodes: dict[str, Node], prog: str = "patchlane") -> str:
    """A fish script: ``patchlane completion fish > ~/.config/fish/completions/patchlane.fish``."""
    lines = [
        f"# {prog} completion for fish, generated from its parser",
        f"complete -c {prog} -f",
    ]
    for path, node in sorted(nodes.items()):
        condition = _fish_condition(path, nodes)
        for name, help_ in node.commands.items():
            lines.append(
                f"complete -c {prog} -n {shlex.quote(condition)} -a {shlex.quote(name)} "
                f"-d {shlex.quote(help_)}"
            )
        if node.dynamic:
            asked = f"({prog} completion --values {node.dynamic} 2>/dev/null)"
            lines.append(f"complete -c {prog} -n {shlex.quote(condition)} -a {shlex.quote(asked)}")
        for option, help_ in node.options.items():
            flag = f"-l {option[2:]}" if option.startswith("--") else f"-s {option[1:]}"
            extra = ""
            if option in node.choices and node.choices[option][0].startswith("@"):
                asked = f"({prog} completion --values {node.choices[option][0][1:]} 2>/dev/null)"
                extra = f" -x -a {shlex.quote(asked)}"
            elif option in node.choices:
                extra = f" -x -a {shlex.quote(' '.join(node.choices[option]))}"
            elif option in node.takes_value:
                extra = " -r -F"
            lines.append(
                f"complete -c {prog} -n {shlex.quote(condition)} {flag}{extra} "
                f"-d {shlex.quote(help_)}"
            )
    return "\n".join(lines) + "\n"


def _fish_condition(path: str, nodes: dict[str, Node]) -> str:
    """Fish's test for "the command line is at ``path``": its words seen, and no deeper word."""
    words = path.split()
    seen = [f"__fish_seen_subcommand_from {word}" for word in words]
    deeper = sorted(nodes[path].commands)
    if not words:
        names = " ".join(sorted(nodes[""].commands))
        return f"not __fish_seen_subcommand_from {names}"
    if deeper:
        seen.append(f"not __fish_seen_subcommand_from {' '.join(deeper)}")
    return "; and ".join(seen)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("shell", nargs="?", choices=SHELLS, help="the shell to complete in")
    p.add_argument(
        "--values",
        choices=DYNAMIC,
        help="print the project's lane names or shim ids, one a line (what the scripts ask for)",
    )


def _project_values(project: Project, kind: str) -> list[str]:
    """The project's lane names (as `lanes` expands them) or shim ids; none where it has none."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.lanes.lanefile import load_lanes

    if kind == "shims":
        return sorted(project.shim_ids())
    try:
        return [lane.name for lane in load_lanes(project.lanes_dir, root=project.root)]
    # a completion never prints an error: the words it has, or none
    except (InputError, OSError):
        return []


def run(project: Project, args: argparse.Namespace) -> int:
    if args.values:
        emit_text("".join(f"{value}\n" for value in _project_values(project, args.values)))
        return ExitCode.OK
    if args.shell is None:
        raise InputError(None, "SHELL", "names no shell", f"name one of {', '.join(SHELLS)}")

    nodes = tree(build_parser())
    emit_text({"bash": bash, "zsh": zsh, "fish": fish}[args.shell](nodes))
    return ExitCode.OK


COMMAND = Command(
    "completion",
    "print a shell completion script: bash, zsh or fish",
    add_arguments,
    run,
    "Print a completion script for bash, zsh or fish, generated from patchlane's own parser. "
    "bash: `source <(patchlane completion bash)` in ~/.bashrc; zsh: `source <(patchlane "
    "completion zsh)` in ~/.zshrc after compinit; fish: `patchlane completion fish > "
    "~/.config/fish/completions/patchlane.fish`.",
)
