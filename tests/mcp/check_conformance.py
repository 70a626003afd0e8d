"""Read every scenario's checks.json from a conformance run and fail unless each scenario not
listed as an expected failure has checks, none of them FAILURE, and each listed one really fails
(a listed scenario that passes means the list is stale). A scenario whose every check the suite
itself skipped (it does not apply) is reported as skipped. WARNING checks (a SHOULD the server
does not follow) are listed but do not fail the run; the suite's own summary, printed before
this, counts a scenario with one as an unexpected failure.

Usage: check_conformance.py RESULTS_DIR EXPECTED_FAILURES_YML
"""

import json
import pathlib
import re
import sys


def expected_failures(path: pathlib.Path) -> set[str]:
    names, section = set(), None
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].rstrip()
        if not line:
            continue
        if re.match(r"^\w+:$", line):
            section = line[:-1]
        elif section == "server" and (m := re.match(r"^\s+-\s+(\S+)$", line)):
            names.add(m.group(1))
    return names


def main(results: pathlib.Path, baseline: pathlib.Path) -> int:
    expected = expected_failures(baseline)
    runs = sorted(results.rglob("checks.json"))
    if not runs:
        print(f"no checks.json under {results}", file=sys.stderr)
        return 1
    problems, passed, skipped, warnings = [], [], [], []
    seen = set()
    for checks_file in runs:
        scenario = checks_file.parent.name
        # The suite names result folders "server-<scenario>-<timestamp>".
        scenario = re.sub(r"-\d{4}-\d\d-\d\dT.*$", "", scenario).removeprefix("server-")
        seen.add(scenario)
        checks = json.loads(checks_file.read_text())
        failures = [c for c in checks if c.get("status") == "FAILURE"]
        successes = [c for c in checks if c.get("status") == "SUCCESS"]
        warnings += [
            f"{scenario}: {c.get('id')}: {c.get('errorMessage') or c.get('description')}"
            for c in checks
            if c.get("status") == "WARNING" and scenario not in expected
        ]
        if checks and all(c.get("status") == "SKIPPED" for c in checks):
            skipped.append(f"{scenario}: {(checks[0].get('errorMessage') or '')[:100]}")
            if scenario in expected:
                problems.append(f"{scenario}: listed as an expected failure but the suite skips it")
        elif scenario in expected:
            if not failures:
                problems.append(f"{scenario}: listed as an expected failure but passes")
        elif failures:
            for c in failures:
                problems.append(f"{scenario}: {c.get('id')}: {c.get('errorMessage') or c.get('description')}")
        elif not successes:
            problems.append(f"{scenario}: no successful check recorded")
        else:
            passed.append(f"{scenario} ({len(successes)} checks)")
    for line in passed:
        print(f"pass  {line}")
    for line in skipped:
        print(f"skip  {line}")
    for line in warnings:
        print(f"warn  {line}")
    for name in sorted(expected - seen):
        problems.append(f"{name}: listed as an expected failure but did not run")
    for line in problems:
        print(f"FAIL  {line}")
    print(
        f"{len(passed)} scenarios passed, {len(skipped)} skipped by the suite, "
        f"{len(expected & seen)} expected failures, {len(warnings)} warnings (SHOULD), "
        f"{len(problems)} problems"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])))
