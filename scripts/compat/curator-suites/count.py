#!/usr/bin/env python3
"""Counts the Curator suites' results from surefire's XML reports.

    count.py REPORTS_DIR KNOWN_FILE...

A known-failures file has one test per line, `SimpleClassName#method` (the method as surefire
names it, without parameters), then whitespace and the reason; `#` starts a comment. Prints
`# ...` lines to show (failures, known failures that passed, flakes), then one line:
`passed failed skipped known flaky`, where failed counts only tests not listed.
"""
import glob
import os
import re
import sys
import xml.etree.ElementTree as ET


def known_tests(paths):
    known = {}
    for path in paths:
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.lstrip().startswith("#"):
                    continue
                fields = line.strip().split(None, 1)
                if fields:
                    known[fields[0]] = fields[1] if len(fields) > 1 else ""
    return known


def test_id(case):
    cls = case.get("classname", "").rsplit(".", 1)[-1]
    name = re.sub(r"[\[(].*$", "", case.get("name", ""))
    return f"{cls}#{name}"


def main():
    reports, known_files = sys.argv[1], sys.argv[2:]
    known = known_tests(known_files)
    passed = failed = skipped = known_failed = flaky = 0
    messages, known_passed = [], []
    for path in sorted(glob.glob(os.path.join(reports, "TEST-*.xml"))):
        for case in ET.parse(path).getroot().iter("testcase"):
            tid = test_id(case)
            bad = case.find("failure")
            if bad is None:
                bad = case.find("error")
            if case.find("skipped") is not None:
                skipped += 1
            elif bad is not None:
                why = (bad.get("message") or bad.get("type") or "").replace("\n", " ")[:300]
                if tid in known:
                    known_failed += 1
                    messages.append(f"# known failure {tid}: {why}")
                else:
                    failed += 1
                    messages.append(f"# FAILED {tid}: {why}")
            else:
                passed += 1
                if tid in known:
                    known_passed.append(tid)
                if case.find("flakyFailure") is not None or case.find("flakyError") is not None:
                    flaky += 1
                    messages.append(f"# flaky (passed on a rerun) {tid}")
    for tid in known_passed:
        messages.append(f"# listed as a known failure but passed: {tid}")
    for message in messages:
        print(message)
    print(passed, failed, skipped, known_failed, flaky)


if __name__ == "__main__":
    main()
