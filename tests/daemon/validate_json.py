#!/usr/bin/env python3
"""Checks structured outputs with validators that are not o1d's own.

usage: validate_json.py FILE
Each line of FILE is a JSON object {"schema": S, "text": T} (S null: any
JSON object, json_object). T must parse with Python's json module (and,
for a null S, be an object), and S must validate it with the jsonschema
package (draft 2020-12, formats checked where jsonschema can check them).
Prints one line per failure and a summary ("N documents: N parsed, N
validated"). Exits 0 when every document passed, 1 when one failed, 2 on
bad input, and 3 when jsonschema is missing (documents were only parsed):
the caller decides whether that skips the test.
"""

import json
import sys


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    try:
        import jsonschema
    except ImportError:
        jsonschema = None
    failed = parsed = validated = n = 0
    with open(sys.argv[1], encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            n += 1
            case = json.loads(line)
            schema, text = case["schema"], case["text"]
            try:
                doc = json.loads(text)
            except ValueError as e:
                print(f"line {lineno}: not JSON ({e}): {text!r}")
                failed += 1
                continue
            parsed += 1
            if schema is None:
                if not isinstance(doc, dict):
                    print(f"line {lineno}: not an object: {text!r}")
                    failed += 1
                continue
            if jsonschema is None:
                continue
            cls = jsonschema.validators.validator_for(
                schema, default=jsonschema.Draft202012Validator)
            # the draft's own formats ("time" is not draft 3's)
            checker = getattr(cls, "FORMAT_CHECKER", None) or \
                jsonschema.draft202012_format_checker
            errors = list(cls(schema, format_checker=checker)
                          .iter_errors(doc))
            if errors:
                print(f"line {lineno}: {errors[0].message}: {text!r} "
                      f"against {json.dumps(schema)}")
                failed += 1
            else:
                validated += 1
    print(f"{n} documents: {parsed} parsed, {validated} validated"
          + ("" if jsonschema else " (jsonschema missing)"))
    if failed:
        return 1
    return 0 if jsonschema else 3


if __name__ == "__main__":
    sys.exit(main())
