"""A small hand-written GraphQL executor for the code-host stand-in: enough of the language for
the queries the probes send (aliases, arguments, nested selections, inline fragments, named
fragments, ``__typename``), no library.

Objects are dicts: ``"__typename"`` names the type, a value is a scalar, a nested dict (an
object), or a callable ``(args) -> (value, error message | None)`` for fields with arguments.
A null field with an error adds ``{"type": "NOT_FOUND", "path": [...], "message": ...}`` to the
answer's ``errors``, like GitHub.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

_TOKEN = re.compile(
    r'\s+|,|#[^\n]*|(?P<p>\.\.\.|[{}():])|(?P<name>[_A-Za-z][_0-9A-Za-z]*)|(?P<int>-?\d+)|(?P<str>"(?:[^"\\]|\\.)*")'
)


class GraphQLSyntaxError(ValueError):
    pass


@dataclass
class Field:
    name: str
    alias: str
    args: dict[str, object] = field(default_factory=dict)
    selections: list | None = None


@dataclass
class Fragment:
    # type condition (None: always)
    on: str | None
    selections: list | None = None
    # a named fragment to look up
    spread: str | None = None


def _tokens(text: str) -> list[tuple[str, object]]:
    out, at = [], 0
    while at < len(text):
        found = _TOKEN.match(text, at)
        if not found:
            raise GraphQLSyntaxError(f"unexpected character {text[at]!r} at {at}")
        at = found.end()
        if found["p"]:
            out.append(("p", found["p"]))
        elif found["name"]:
            out.append(("name", found["name"]))
        elif found["int"]:
            out.append(("value", int(found["int"])))
        elif found["str"]:
            out.append(("value", json.loads(found["str"])))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens, self.at = _tokens(text), 0

    def peek(self) -> tuple[str, object] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, kind: str, value: object = None) -> object:
        token = self.peek()
        if token is None or token[0] != kind or (value is not None and token[1] != value):
            raise GraphQLSyntaxError(
                f"expected {value or kind}, found {token[1] if token else 'the end'}"
            )
        self.at += 1
        return token[1]

    def document(self) -> tuple[list, dict[str, Fragment]]:
        operation, fragments = None, {}
        while self.peek() is not None:
            if self.peek() == ("name", "fragment"):
                self.take("name")
                name = self.take("name")
                self.take("name", "on")
                on = self.take("name")
                fragments[name] = Fragment(on, self.selection_set())
            else:
                if self.peek() == ("name", "query"):
                    self.take("name")
                    if self.peek() and self.peek()[0] == "name":
                        self.take("name")
                operation = self.selection_set()
        if operation is None:
            raise GraphQLSyntaxError("no operation")
        return operation, fragments

    def selection_set(self) -> list:
        self.take("p", "{")
        out = []
        while self.peek() != ("p", "}"):
            out.append(self.selection())
        self.take("p", "}")
        return out

    def selection(self):
        if self.peek() == ("p", "..."):
            self.take("p")
            if self.peek() == ("name", "on"):
                self.take("name")
                return Fragment(self.take("name"), self.selection_set())
            return Fragment(None, spread=self.take("name"))
        alias = name = self.take("name")
        if self.peek() == ("p", ":"):
            self.take("p")
            name = self.take("name")
        args = {}
        if self.peek() == ("p", "("):
            self.take("p")
            while self.peek() != ("p", ")"):
                key = self.take("name")
                self.take("p", ":")
                token = self.peek()
                self.at += 1
                args[key] = {"true": True, "false": False, "null": None}.get(token[1], token[1])
            self.take("p", ")")
        selections = self.selection_set() if self.peek() == ("p", "{") else None
        return Field(name, alias, args, selections)


def _matches(on: str | None, typename: str, unions: dict[str, set[str]]) -> bool:
    return on is None or on == typename or typename in unions.get(on, set())


def execute(text: str, root: dict, *, unions: dict[str, set[str]] | None = None) -> dict:
    """The answer (``{"data": …}`` and ``errors`` when any) to the query ``text`` over ``root``."""
    unions = unions or {}
    try:
        operation, fragments = _Parser(text).document()
    except GraphQLSyntaxError as exc:
        return {"errors": [{"message": f"Parse error: {exc}"}]}
    errors: list[dict] = []

    def run(selections: list, obj: dict, path: list) -> dict:
        out: dict[str, object] = {}
        for item in selections:
            if isinstance(item, Fragment):
                fragment = fragments.get(item.spread) if item.spread else item
                if fragment is None:
                    errors.append({"message": f"unknown fragment {item.spread}"})
                elif _matches(fragment.on, str(obj.get("__typename")), unions):
                    out.update(run(fragment.selections or [], obj, path))
                continue
            value = obj.get(item.name)
            if callable(value):
                value, error = value(item.args)
                if error:
                    errors.append(
                        {"type": "NOT_FOUND", "path": [*path, item.alias], "message": error}
                    )
            if isinstance(value, dict) and item.selections is not None:
                value = run(item.selections, value, [*path, item.alias])
            out[item.alias] = value
        return out

    answer: dict[str, object] = {"data": run(operation, root, [])}
    if errors:
        answer["errors"] = errors
    return answer
