#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A strict parser of Prometheus' text exposition format 0.0.4.

    prom_parse.py FILE          parse FILE; print one line per sample:
                                name{label="v",...} value   (labels sorted)
                                exit 1 with the first error (line number)
    prom_parse.py --self-test   check that malformed inputs are refused

As a module: parse(text) -> (families, samples); families maps a name to
{"type": .., "help": ..}; samples is a list of (name, labels dict, value).

Strict where the format is (so that node_exporter's textfile collector, and
Prometheus, take what passes): the text ends with a newline; metric and
label names match their grammar; label values and HELP use only the escapes
the format has; a family's TYPE and HELP come at most once and TYPE before
its samples; a family's samples are contiguous; no series twice; values are
Go floats (NaN, +Inf, -Inf); counters are not negative or NaN; histogram and
summary suffixes belong to their family.  Also refused: timestamps (the
textfile collector rejects them) and label names starting with "__".
"""
import math
import re
import sys

METRIC = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|Inf|inf|NaN)\Z")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


class ParseError(Exception):
    pass


def _unescape(s, allowed, lineno):
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            if i + 1 >= len(s) or s[i + 1] not in allowed:
                raise ParseError(f"line {lineno}: bad escape in {s!r}")
            out.append({"\\": "\\", "n": "\n", '"': '"'}[s[i + 1]])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _labels(s, i, lineno):
    """Parse {...} starting at s[i] == '{'; return (dict, index after '}')."""
    labels = {}
    i += 1
    while True:
        while i < len(s) and s[i] in " \t":
            i += 1
        if i < len(s) and s[i] == "}":
            return labels, i + 1
        m = LABEL.match(s, i)
        if not m:
            raise ParseError(f"line {lineno}: bad label name at column {i + 1}")
        name = m.group(0)
        if name.startswith("__"):
            raise ParseError(f"line {lineno}: reserved label name {name}")
        if name in labels:
            raise ParseError(f"line {lineno}: label {name} twice")
        i = m.end()
        while i < len(s) and s[i] in " \t":
            i += 1
        if s[i:i + 2] != '="':
            raise ParseError(f"line {lineno}: expected =\" after label {name}")
        i += 2
        j = i
        while j < len(s) and s[j] != '"':
            if s[j] == "\\":
                j += 1
            if s[j:j + 1] == "\n":
                raise ParseError(f"line {lineno}: raw newline in a label value")
            j += 1
        if j >= len(s):
            raise ParseError(f"line {lineno}: unterminated label value")
        labels[name] = _unescape(s[i:j], '\\n"', lineno)
        i = j + 1
        while i < len(s) and s[i] in " \t":
            i += 1
        if i < len(s) and s[i] == ",":
            i += 1
        elif i < len(s) and s[i] == "}":
            return labels, i + 1
        else:
            raise ParseError(f"line {lineno}: expected , or }} after label {name}")


def _family_of(name, families):
    """The family a sample name belongs to (histogram/summary suffixes)."""
    for suf, kinds in (("_bucket", ("histogram",)), ("_sum", ("histogram", "summary")),
                       ("_count", ("histogram", "summary"))):
        base = name[: -len(suf)]
        if name.endswith(suf) and families.get(base, {}).get("type") in kinds:
            return base
    return name


def parse(text):
    if text and not text.endswith("\n"):
        raise ParseError("the text does not end with a newline")
    families, samples, seen, done = {}, [], set(), set()
    current = None
    for lineno, line in enumerate(text.split("\n")[:-1] if text else [], 1):
        if line.strip() == "":
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                if not METRIC.fullmatch(name):
                    raise ParseError(f"line {lineno}: bad metric name {name!r}")
                fam = families.setdefault(name, {})
                if name in done or (current not in (None, name) and fam.get("_samples")):
                    raise ParseError(f"line {lineno}: {parts[1]} of {name} after its samples")
                if parts[1] == "HELP":
                    if "help" in fam:
                        raise ParseError(f"line {lineno}: HELP of {name} twice")
                    fam["help"] = _unescape(parts[3] if len(parts) > 3 else "", "\\n", lineno)
                else:
                    if "type" in fam:
                        raise ParseError(f"line {lineno}: TYPE of {name} twice")
                    if len(parts) != 4 or parts[3] not in TYPES:
                        raise ParseError(f"line {lineno}: bad TYPE line {line!r}")
                    if fam.get("_samples"):
                        raise ParseError(f"line {lineno}: TYPE of {name} after its samples")
                    fam["type"] = parts[3]
                if current is not None and current != name:
                    done.add(current)
                current = name
            continue  # any other comment
        m = METRIC.match(line)
        if not m:
            raise ParseError(f"line {lineno}: bad sample line {line!r}")
        name, i = m.group(0), m.end()
        labels = {}
        if i < len(line) and line[i] == "{":
            labels, i = _labels(line, i, lineno)
        rest = line[i:]
        if not rest[:1] in (" ", "\t"):
            raise ParseError(f"line {lineno}: no blank before the value")
        fields = rest.split()
        if len(fields) != 1:
            raise ParseError(f"line {lineno}: want exactly one value (no timestamp), got {fields}")
        if not FLOAT.match(fields[0]):
            raise ParseError(f"line {lineno}: bad value {fields[0]!r}")
        value = float(fields[0].replace("Inf", "inf"))
        famname = _family_of(name, families)
        if famname in done:
            raise ParseError(f"line {lineno}: samples of {famname} not contiguous")
        if current is not None and current != famname:
            done.add(current)
        current = famname
        fam = families.setdefault(famname, {})
        fam["_samples"] = True
        fam.setdefault("type", "untyped")
        if fam["type"] == "counter" and (math.isnan(value) or value < 0):
            raise ParseError(f"line {lineno}: counter {name} is {fields[0]}")
        key = (name, tuple(sorted(labels.items())))
        if key in seen:
            raise ParseError(f"line {lineno}: series {name}{labels} twice")
        seen.add(key)
        samples.append((name, labels, value))
    for fam in families.values():
        fam.pop("_samples", None)
        fam.setdefault("type", "untyped")
    return families, samples


def _fmt(name, labels, value):
    lab = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    v = int(value) if value.is_integer() else value
    return f"{name}{{{lab}}} {v}"


BAD = [
    ("no final newline", "a 1"),
    ("bad metric name", "1a 1\n"),
    ("bad label name", 'a{1x="v"} 1\n'),
    ("reserved label", 'a{__x="v"} 1\n'),
    ("bad escape", 'a{x="\\t"} 1\n'),
    ("unterminated value", 'a{x="v} 1\n'),
    ("no value", "a\n"),
    ("bad value", "a one\n"),
    ("timestamp", "a 1 1700000000000\n"),
    ("two values", "a 1 2 3\n"),
    ("TYPE twice", "# TYPE a gauge\n# TYPE a gauge\na 1\n"),
    ("bad type", "# TYPE a meter\na 1\n"),
    ("TYPE after sample", "a 1\n# TYPE a gauge\n"),
    ("not contiguous", "a 1\nb 1\na{x=\"y\"} 2\n"),
    ("duplicate series", 'a{x="1"} 1\na{x="1"} 2\n'),
    ("negative counter", "# TYPE c_total counter\nc_total -1\n"),
    ("label twice", 'a{x="1",x="2"} 1\n'),
]
GOOD = [
    '# HELP a x \\\\ y\n# TYPE a gauge\na{x="q\\"\\n\\\\",} 1.5e3\na{x=""} NaN\nb -Inf\n',
    "# HELP h a histogram\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 2\nh_count 1\n",
]


def self_test():
    for what, text in BAD:
        try:
            parse(text)
        except ParseError:
            continue
        print(f"self-test: accepted a bad input ({what}): {text!r}")
        return 1
    for text in GOOD:
        try:
            parse(text)
        except ParseError as e:
            print(f"self-test: refused a good input: {e}: {text!r}")
            return 1
    print(f"self-test: {len(BAD)} bad inputs refused, {len(GOOD)} good ones parsed")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        text = f.read()
    try:
        _, samples = parse(text)
    except ParseError as e:
        print(f"{argv[1]}: {e}", file=sys.stderr)
        return 1
    for s in samples:
        print(_fmt(*s))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
