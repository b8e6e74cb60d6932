#!/usr/bin/env python3
"""The findings table of docs/findings.md from full runs' summary.json files.

Usage: findings-table.py DIR...   (each DIR a report directory of `corral lab run NAME` without --quick)

One row per claim: the verdict in the full run; whether the variant its `reason` names behaves (an AGREES
must fail without its cause, a DISAGREES must turn AGREES under its stated reason; of two stated reasons,
one that behaves is enough and is the one shown); and what may be cited,
which follows from those two. Then the count of unexplained DISAGREES. Markdown on stdout.
"""
import json
import sys


def behaves(kind, k):
    """Whether a finding of `kind` behaves in a variant where it is `k`: an AGREES fails without its cause,
    a DISAGREES turns AGREES under its stated reason."""
    return (kind == "AGREES" and k == "DISAGREES") or (kind == "DISAGREES" and k == "AGREES")


def there(f):
    """The reason variant to show and the finding's kind there, or None. A claim may state two reasons (a
    list): one that behaves decides — a disagreement with two stated reasons is explained when either is
    confirmed — else the first that ran."""
    ran = [(r["variant"], r["kind"]) for r in f.get("reasons", []) if r.get("kind")]
    return next((t for t in ran if behaves(f["kind"], t[1])), ran[0] if ran else None)


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
                ok, variant, shown = False, "", "–"
            else:
                variant, k = t
                ok = behaves(kind, k)
                shown = f"*{variant}*: {k} ({'behaves' if ok else 'does not'})"
            if kind in ("FITTED", "CONSEQUENCE", "INCONCLUSIVE"):
                shown = shown if t else "–"
            if kind == "DISAGREES" and not ok:
                unexplained.append(f"{j['scenario']} `{f['check']}`")
            rows.append(f"| {j['scenario']} | `{f['check']}` | {f['status']} | {shown} | {cite(kind, ok, variant)} |")
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
