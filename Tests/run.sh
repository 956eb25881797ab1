#!/usr/bin/env bash
# Runs every test (`swift test`, two workers) within a deadline: a test that hangs must not hold
# the run until CI's own limit kills it without a word. Past TEST_TIMEOUT seconds (default 900;
# the whole suite takes 2-5 minutes) it says which tests were still running, what processes they
# had started and where the test process's threads were, and stops the run. If every test that
# ended had passed, the ones that had not ended run again, alone, once: the run passes only if
# they do, and the report of the hang above stays in the output for someone to fix.
# Usage: Tests/run.sh SWIFT [swift test options, e.g. --filter X]
# (the environment is the tests': HEALTHGATE_BIN, HEALTHGATE_PYTHON, TMPDIR, ...; TEST_BUILD_OPTIONS,
# e.g. "--scratch-path .build/asan --sanitize address", go to both runs)
set -u
swift=$1
shift
limit=${TEST_TIMEOUT:-900}
dir=${TMPDIR:-/tmp}

# The tests not ended in an event stream: started, and not ended since (Swift Testing writes
# the stream as it goes; the console output reaches a pipe in blocks). Test functions only.
unfinished() {
    sed -n -E 's/.*"kind":"test(Started|Ended)".*"testID":"([^"]*)".*/\1 \2/p' "$1" | sed 's|\\/|/|g' |
        awk '{ if ($1 == "Started") open[$2] = 1; else delete open[$2] }
             END { for (t in open) if (index(t, "/") > 0) print t }' | sort
}

# Every process under the run's own.
descendants() {
    ps -eo pid=,ppid=,etimes=,args= | awk -v root="$1" '
        { pid[NR] = $1; parent[$1] = $2; line[$1] = $0 }
        END { for (i = 1; i <= NR; i++) { p = pid[i]; q = p
                while (q != "" && q != root && q != 1 && q != 0) q = parent[q]
                if (q == root && p != root) print "  " substr(line[p], 1, 200) } }'
}

report() {   # run's pid, its event stream, its limit
    echo
    echo "=== the tests did not end within ${3}s; still running:"
    unfinished "$2" | sed 's/^/  /'
    echo "=== processes of the run (pid ppid seconds command):"
    descendants "$1"
    local xctest
    xctest=$(pgrep -f 'PackageTests.xctest' | head -1)
    if [ -n "$xctest" ] && command -v gdb >/dev/null; then
        echo "=== where the test process's threads are, in the project's code (innermost first):"
        gdb -p "$xctest" -batch -ex "thread apply all bt 60" 2>/dev/null | awk -v root="$PWD/" '
            /^Thread / { if (frames != "") print "  thread " id ":" frames; id = $2; frames = ""; next }
            /^#/ && index($0, " at " root) { n = split($0, w, " at " root); frames = frames " " w[n] }
            END { if (frames != "") print "  thread " id ":" frames }' | head -40
    fi
}

# What the tests started and did not stop goes with the run: a test process that crashed left
# its servers (mosquitto, PostgreSQL, influxd, serve) running, each in a process group of its own
# (Foundation's Process), with the run's temporary directory in its command line. Only when that
# directory is the run's own (`make test` gives it one), never a shared /tmp.
leftovers() {
    case "$dir" in ""|/|/tmp|/tmp/) return ;; esac
    pgrep -f -- "$dir/" >/dev/null 2>&1 || return 0
    echo "=== stopping what the tests left running: $(pgrep -f -l -- "$dir/" | awk '{print $2}' | sort -u | paste -sd' ')"
    pkill -TERM -f -- "$dir/" 2>/dev/null
    sleep 2
    pkill -KILL -f -- "$dir/" 2>/dev/null
}

run() {   # event stream, limit, swift test options...
    local events=$1 limit=$2
    shift 2
    rm -f "$events" "$events.hung"
    # shellcheck disable=SC2086
    setsid "$swift" test ${TEST_BUILD_OPTIONS:-} --parallel --num-workers 2 --event-stream-output-path "$events" \
        --event-stream-version 0 "$@" &
    local pid=$!
    (
        sleep "$limit"
        if kill -0 "$pid" 2>/dev/null; then
            report "$pid" "$events" "$limit"
            touch "$events.hung"
            kill -KILL -- "-$pid" 2>/dev/null
        fi
    ) 2>/dev/null &
    local watchdog=$!
    wait "$pid"
    local status=$?
    pkill -P "$watchdog" sleep 2>/dev/null
    wait "$watchdog" 2>/dev/null
    leftovers
    return $status
}

run "$dir/test-events.jsonl" "$limit" "$@"
status=$?
[ -e "$dir/test-events.jsonl.hung" ] || exit $status

if grep '"kind":"issueRecorded"' "$dir/test-events.jsonl" | grep -vq '"isKnown":true'; then
    echo "=== and tests that ended had failed: the run fails"
    exit 1
fi
hung=$(unfinished "$dir/test-events.jsonl")
[ -n "$hung" ] || { echo "=== the run hung outside any test: it fails"; exit 1; }
filter=$(echo "$hung" | sed -E 's|^[^/]*/([A-Za-z0-9_]+).*|\1|' | sort -u | paste -sd'|')
echo "=== every test that ended passed; the ones that did not run again, alone: $filter"
run "$dir/test-events-again.jsonl" 600 --skip-build --filter "$filter"
status=$?
if [ $status -eq 0 ] && [ ! -e "$dir/test-events-again.jsonl.hung" ]; then
    echo "=== they passed when run again: the run passes, but a test hung above (its report says where): fix it"
    exit 0
fi
exit 1
