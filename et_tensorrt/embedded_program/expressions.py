"""A strict grammar for the symbolic-shape expressions in an embedded program.

torch's deserializer hands every ``expr_str`` to ``sympy.sympify``, which ``eval``s it: an expression is
code. torch 2.13 writes them with ``sympy.srepr``: nested constructor calls such as
``FloorDiv(Add(Symbol('s0', positive=True, integer=True), Integer(7)), Integer(8))``. Before torch sees
one it must parse, under the grammar below, into exactly such a tree:

    expr    := CALL '(' args ')' | 'Symbol' '(' SYMBOL_NAME {',' ASSUMPTION '=' BOOL} ')'
             | 'Integer' '(' INT ')' | 'Rational' '(' INT ',' INT ')'
             | 'Float' '(' DECIMAL [',' 'precision' '=' INT] ')'
             | 'oo' | '-oo' | 'true' | 'false'
    args    := expr {',' expr}

with CALL one of the sympy / ``torch.utils._sympy.functions`` classes torch prints for shape arithmetic,
SYMBOL_NAME a quoted torch symbol name (``'s0'``, ``'u3'``), bounded integers, bounded length, nesting
and powers. No other names, strings, attributes, operators or keywords: nothing ``eval`` could run.
"""

from __future__ import annotations

import re

# Classes torch prints for shape arithmetic and guards (sympy's and torch.utils._sympy.functions').
CALLS = frozenset(
    {
        "Add",
        "Mul",
        "Pow",
        "Max",
        "Min",
        "Abs",
        "Mod",
        "PythonMod",
        "FloorDiv",
        "CeilDiv",
        "CleanDiv",
        "ModularIndexing",
        "Where",
        "IntTrueDiv",
        "FloatTrueDiv",
        "TruncToInt",
        "TruncToFloat",
        "CeilToInt",
        "FloorToInt",
        "RoundToInt",
        "ToFloat",
        "Identity",
        "IsNonOverlappingAndDenseIndicator",
        "Equality",
        "Unequality",
        "StrictLessThan",
        "LessThan",
        "StrictGreaterThan",
        "GreaterThan",
        "And",
        "Or",
        "Not",
    }
)
# Left out on purpose: PowByNatural, FloatPow, LShift, RShift, RoundDecimal. Their operands are unbounded
# and sympy evaluates literal arguments eagerly (PowByNatural(10**19, 10**19) does not finish).
ATOMS = frozenset({"oo", "true", "false"})
ASSUMPTIONS = frozenset(
    {
        "positive",
        "negative",
        "nonnegative",
        "nonpositive",
        "integer",
        "real",
        "finite",
        "infinite",
        "zero",
        "nonzero",
        "commutative",
        "rational",
        "extended_real",
        "even",
        "odd",
    }
)
SYMBOL = re.compile(r"[a-z]{1,8}[0-9]{1,6}\Z")  # s0, u12, zuf3: torch's symbol names
_DECIMAL = re.compile(r"-?[0-9]{1,20}(\.[0-9]{0,20})?(e[-+]?[0-9]{1,3})?\Z")
MAX_LENGTH = 8192
MAX_DEPTH = 64
MAX_TOKENS = 2048
MAX_INT = 2**63
MAX_EXPONENT = 8
MAX_POWERS = 4  # with MAX_EXPONENT and MAX_INT, bounds the integers Pow can make

_TOKEN = re.compile(
    r"\s*(?:(?P<int>-?[0-9]{1,20})(?![0-9.eE])|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<str>'[^'\\\n]{0,64}')|(?P<punct>[(),=])|(?P<neg>-))"
)


class ExpressionError(ValueError):
    """An expression string outside the grammar; the message says where."""


def _tokens(expr: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(expr):
        if expr[pos:].strip() == "":
            break
        m = _TOKEN.match(expr, pos)
        if m is None or m.end() == pos:
            pos += len(expr[pos:]) - len(expr[pos:].lstrip())
            raise ExpressionError(f"unexpected character {expr[pos : pos + 1]!r} at {pos}")
        out.append((m.lastgroup, m.group(m.lastgroup)))
        pos = m.end()
        if len(out) > MAX_TOKENS:
            raise ExpressionError(f"more than {MAX_TOKENS} tokens")
    return out


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]):
        self.tokens, self.i, self.powers = tokens, 0, 0

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.i] if self.i < len(self.tokens) else ("end", "")

    def take(self, kind: str | None = None, text: str | None = None) -> str:
        k, t = self.peek()
        if (kind and k != kind) or (text and t != text):
            raise ExpressionError(f"expected {text or kind} at token {self.i}, found {t or 'the end'!r}")
        self.i += 1
        return t

    def integer(self) -> int:
        value = int(self.take("int"))
        if abs(value) >= MAX_INT:
            raise ExpressionError(f"integer {value} is out of range")
        return value

    def expr(self, depth: int) -> int | None:
        """Parse one expression; returns its value when it is an ``Integer(...)`` literal."""
        if depth > MAX_DEPTH:
            raise ExpressionError(f"nested deeper than {MAX_DEPTH}")
        kind, text = self.peek()
        if kind == "neg":  # -oo
            self.take()
            self.take("name", "oo")
            return None
        name = self.take("name")
        if name in ATOMS:
            return None
        self.take("punct", "(")
        literal = None
        if name == "Symbol":
            quoted = self.take("str")
            if not SYMBOL.match(quoted[1:-1]):
                raise ExpressionError(f"symbol name {quoted} is not a shape symbol")
            while self.peek()[1] == ",":
                self.take()
                if self.take("name") not in ASSUMPTIONS:
                    raise ExpressionError(f"unknown symbol assumption at token {self.i - 1}")
                self.take("punct", "=")
                if self.take("name") not in ("True", "False"):
                    raise ExpressionError("a symbol assumption is not True or False")
        elif name == "Integer":
            literal = self.integer()
        elif name == "Rational":
            self.integer()
            self.take("punct", ",")
            if self.integer() == 0:
                raise ExpressionError("Rational with denominator 0")
        elif name == "Float":
            quoted = self.take("str")
            if not _DECIMAL.match(quoted[1:-1]):
                raise ExpressionError(f"Float literal {quoted} is not a decimal number")
            if self.peek()[1] == ",":
                self.take()
                self.take("name", "precision")
                self.take("punct", "=")
                if not 1 <= self.integer() <= 128:
                    raise ExpressionError("Float precision out of range")
        elif name in CALLS:
            args = [self.expr(depth + 1)]
            while self.peek()[1] == ",":
                self.take()
                args.append(self.expr(depth + 1))
            if name == "Pow":
                self.powers += 1
                if len(args) != 2 or args[1] is None or abs(args[1]) > MAX_EXPONENT or self.powers > MAX_POWERS:
                    raise ExpressionError(
                        f"Pow must raise to an Integer of at most {MAX_EXPONENT}, at most {MAX_POWERS} times"
                    )
        else:
            raise ExpressionError(f"name {name!r} is not a shape-arithmetic class")
        self.take("punct", ")")
        return literal


def check_expression(expr: str) -> None:
    """Raise ExpressionError unless ``expr`` is a shape expression of the grammar above."""
    if not isinstance(expr, str) or not expr.strip():
        raise ExpressionError("not a non-empty string")
    if len(expr) > MAX_LENGTH:
        raise ExpressionError(f"{len(expr)} characters (at most {MAX_LENGTH})")
    parser = _Parser(_tokens(expr))
    parser.expr(0)
    if parser.i != len(parser.tokens):
        raise ExpressionError(f"unexpected {parser.peek()[1]!r} after the expression")
