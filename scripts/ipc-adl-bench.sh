#!/usr/bin/env bash
# Runs `nesy solve --search lazy --preferred` (Fast Downward's
# lazy_greedy([ff()], preferred=[ff()])) on the N smallest problems of every
# ipc-adl domain with a per-problem timeout, checks every plan with
# `nesy validate`, and prints a markdown table (one row per problem) and a
# per-domain summary. Usage:
#   scripts/ipc-adl-bench.sh NESY_BINARY [N=3] [TIMEOUT=60] [DATASETS=../shared/datasets]
# Environment: SOLVE_FLAGS replaces the search flags (default "--search lazy
# --preferred"; e.g. "--search portfolio"); DOMAINS, a space-separated list,
# limits the run to those domains.
set -u
NESY=${1:?usage: $0 NESY_BINARY [N] [TIMEOUT] [DATASETS]}
N=${2:-3}
TO=${3:-60}
DS=${4:-../shared/datasets}
FLAGS=${SOLVE_FLAGS:---search lazy --preferred}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| domain | problem | solved | plan length | wall s (parse+ground+search) | search s | expanded | evaluated | evaluations/s | nesy validate | portfolio member |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for dir in "$DS"/ipc-adl/*/; do
	dom=$(basename "$dir")
	if [ -n "${DOMAINS:-}" ] && [[ " $DOMAINS " != *" $dom "* ]]; then
		continue
	fi
	# Smallest problems first (the grounding test's order).
	probs=$(ls -S -r "$dir" | grep -v -e '^domain' -e '^orig-domain' | head -n "$N")
	for p in $probs; do
		d="$dir/domain.pddl"
		[ -f "$dir/domain-$p" ] && d="$dir/domain-$p"
		start=$(date +%s.%N)
		timeout $((TO + 30)) "$NESY" solve --domain "$d" --problem "$dir/$p" $FLAGS \
			--timeout "${TO}s" --json >"$tmp/out.json" 2>"$tmp/err.txt"
		end=$(date +%s.%N)
		wall=$(echo "$end - $start" | bc)
		python3 - "$tmp/out.json" "$tmp/plan.txt" >"$tmp/row.txt" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    print("error\t-\t-\t-\t-\t-\t-"); sys.exit()
open(sys.argv[2], "w").write("\n".join(d.get("plan") or []) + "\n")
# search_seconds is the search alone (seconds is the whole command).
ss = d.get("search_seconds", 0)
ev = d.get("evaluated")
print("%s\t%s\t%.2f\t%s\t%s\t%s\t%s" % ("yes" if d.get("solved") else d.get("status", "no"),
      len(d.get("plan") or []) if d.get("solved") else "-", ss, d.get("expanded", "-"), ev if ev is not None else "-",
      "%.0f" % (ev / ss) if ev and ss > 0.01 else "-", d.get("portfolio_member") or "-"))
PY
		IFS=$'\t' read -r solved len secs exp ev evs member <"$tmp/row.txt"
		val="-"
		if [ "$solved" = yes ]; then
			if "$NESY" validate --domain "$d" --problem "$dir/$p" --plan "$tmp/plan.txt" >/dev/null 2>&1; then
				val=valid
			else
				val=REJECTED
			fi
		elif [ "$solved" = error ]; then
			solved="error: $(head -c 150 "$tmp/err.txt" | tr '\n|' '  ')"
		fi
		printf '| %s | %s | %s | %s | %.1f | %s | %s | %s | %s | %s | %s |\n' "$dom" "$p" "$solved" "$len" "$wall" "$secs" "$exp" "$ev" "$evs" "$val" "${member:--}"
	done
done
