#!/usr/bin/env python3
"""The instructions a kernel's warps stall on most, from `ncu --page source --print-source sass
--csv` (attention_ncu.sh): the top N by stall samples with each one's leading stall reasons, and
the totals per reason. Usage: ncu_sass_top.py FILE.csv [N]"""
import csv
import sys


def num(s):
    try:
        return float(s.replace(",", ""))
    except (ValueError, AttributeError):
        return 0.0


def main():
    path, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f)]
    head_i = next((i for i, r in enumerate(rows) if any("Source" == c.strip() for c in r)), None)
    if head_i is None:
        print(f"{path}: no header with a Source column; first line: {rows[0][:6] if rows else ''}")
        return
    head = [c.strip() for c in rows[head_i]]
    data = rows[head_i + 1:]
    src = head.index("Source")
    total = next((i for i, c in enumerate(head) if c.startswith("Warp Stall Sampling (All")), None)
    if total is None:
        print("columns:", head)
        return
    reasons = [i for i, c in enumerate(head) if c.startswith("stall_") or "Stall" in c and i != total
               and "Not-issued" not in c and "All" not in c]
    sums = {head[i]: sum(num(r[i]) for r in data if len(r) > i) for i in reasons}
    allsum = sum(num(r[total]) for r in data if len(r) > total)
    print(f"{len(data)} instructions, {allsum:.0f} stall samples")
    for k, v in sorted(sums.items(), key=lambda kv: -kv[1])[:12]:
        if v > 0:
            print(f"  {k:48s} {v:9.0f} {100 * v / max(allsum, 1):5.1f}%")
    addr = head.index("Address") if "Address" in head else None
    top = sorted((r for r in data if len(r) > total), key=lambda r: -num(r[total]))[:n]
    for r in top:
        lead = sorted(((num(r[i]), head[i]) for i in reasons), reverse=True)[:3]
        why = ", ".join(f"{h.replace('stall_', '')} {v:.0f}" for v, h in lead if v > 0)
        where = r[addr] if addr is not None else ""
        print(f"{num(r[total]):7.0f} {where:>8s}  {r[src].strip()[:60]:60s} {why}")


if __name__ == "__main__":
    main()
