#!/usr/bin/env bash
# make fuzz: each target under libFuzzer (with AddressSanitizer) for FUZZ_SECONDS, from its
# committed corpus (Tests/Fuzz/corpus/<target>; what it finds new goes to .build/fuzz-work/corpus,
# or into the committed corpus with FUZZ_MERGE=1). Fails on any finding: its reproducer is left in
# .build/fuzz-work/findings/<target>/ (commit it to Tests/Fuzz/findings/<target>/ with the fix: the
# tests run it). Prints each target's executions, exec/s and coverage.
# Usage: Tests/Fuzz/run.sh BINARY SECONDS TARGET...
set -u
bin=$1 seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
work=${FUZZ_WORK:-$here/../../.build/fuzz-work}
mkdir -p "$work"
work=$(cd "$work" && pwd)
tmp=$(mktemp -d /tmp/healthgate-fuzz.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failed=""
# A binary whose code is not instrumented fuzzes blind and finds nothing (docs/development.md, Proof): asked
# once, before any target runs, how many coverage counters it loaded (a whole build: ~137,000).
counters=$(HEALTHGATE_FUZZ=$1 TMPDIR=$tmp "$bin" -runs=0 2>&1 |
    sed -n -E 's/^INFO: Loaded [0-9]+ modules? +\(([0-9]+) inline 8-bit counters\).*/\1/p' | head -1)
if [ "${counters:-0}" -lt "${FUZZ_MIN_COUNTERS:-20000}" ]; then
    echo "$bin has ${counters:-no} coverage counters (a whole build has ~137,000): its code is not instrumented;"
    echo "rebuild it from scratch (rm -rf .build/fuzz; make fuzz)"
    exit 1
fi
summary=""
for t in "$@"; do
    mkdir -p "$work/corpus/$t" "$work/findings/$t" "$work/logs"
    log="$work/logs/$t.txt"
    echo "fuzzing $t for ${seconds}s"
    TMPDIR=$tmp HEALTHGATE_FUZZ=$t "$bin" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$work/findings/$t/" "$work/corpus/$t" "$here/corpus/$t" > "$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | sed -n -E 's/.* cov: ([0-9]+) ft: ([0-9]+).*/\1 edges, \2 features/p')
    if [ $rc -ne 0 ]; then
        failed="$failed $t"
        echo "  FINDING in $t (exit $rc): $(ls "$work/findings/$t" | head -3 | tr '\n' ' ')"
        grep -E "ERROR|Fatal error|SUMMARY" "$log" | head -5 | sed 's/^/    /'
    fi
    if [ "${FUZZ_MERGE:-0}" = 1 ]; then
        HEALTHGATE_FUZZ=$t TMPDIR=$tmp "$bin" -merge=1 -max_len=65536 "$here/corpus/$t" "$work/corpus/$t" >> "$log" 2>&1
    fi
    summary="$summary$(printf '%-14s %12s execs %8s exec/s  %s' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}")\n"
done
echo
echo "target              executions    speed   coverage (${seconds}s each)"
printf "$summary"
[ -z "$failed" ] || { echo "findings in:$failed"; exit 1; }
