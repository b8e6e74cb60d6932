#!/usr/bin/env python3
"""The findings table of docs/findings.md from full runs' summary.json files.

Usage: findings-table.py DIR...   (each DIR a report directory of `corral lab run NAME` without --quick)

One row per claim: the verdict in the full run; whether the variant its `reason` names behaves (an AGREES
must fail without its cause, a DISAGREES must turn AGREES under its stated reason); and what may be cited,
which follows from those two. Then the count of unexplained DISAGREES. Markdown on stdout.
"""
import json
import sys


def there(f):
    """The kind of the finding in its reason variant, or None."""
    for r in f.get("reasons", []):
        if r.get("kind"):
            return r["variant"], r["kind"]
    return None


def cite(kind, behaves, variant):
    if kind == "AGREES":
        if behaves:
            return "yes: agrees, and fails without its cause"
        return "not from this run: its variant keeps it AGREES (a cause test elsewhere is on the seed's page)"
    if kind == "DISAGREES":
        if behaves:
            return f"the disagreement, with its reason (confirmed by *{variant}*)"
        return "no: unexplained disagreement"
    if kind == "FITTED":
        return "no: fitted to this number"
    if kind == "CONSEQUENCE":
        return "as a property of the model, not of the paper"
    return "no: inconclusive"


def main(dirs):
    rows, unexplained, counts = [], [], {}
    for d in dirs:
        j = json.load(open(f"{d}/summary.json"))
        for f in j["findings"]:
            kind = f["kind"]
            counts[kind] = counts.get(kind, 0) + 1
            t = there(f)
            if t is None:
                behaves, variant, shown = False, "", "–"
            else:
                variant, k = t
                behaves = (kind == "AGREES" and k == "DISAGREES") or (kind == "DISAGREES" and k == "AGREES")
                shown = f"*{variant}*: {k} ({'behaves' if behaves else 'does not'})"
            if kind in ("FITTED", "CONSEQUENCE", "INCONCLUSIVE"):
                shown = shown if t else "–"
            if kind == "DISAGREES" and not behaves:
                unexplained.append(f"{j['scenario']} `{f['check']}`")
            rows.append(f"| {j['scenario']} | `{f['check']}` | {f['status']} | {shown} | {cite(kind, behaves, variant)} |")
    print("| scenario | claim | verdict (full run) | its reason variant → the claim there | may be cited |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    total = sum(counts.values())
    print()
    print(
        f"{total} findings: "
        + ", ".join(f"{counts[k]} {k}" for k in sorted(counts))
        + f"; **{len(unexplained)} unexplained DISAGREES** (their reason variant does not turn them AGREES): "
        + ", ".join(unexplained)
        + "."
    )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
