#!/usr/bin/env bash
# Runs one libFuzzer target built by `make fuzz-build` (see mk/fuzz.mk).
#
#   tests/fuzz/run.sh NAME SECONDS [libFuzzer flags...]
#       Fuzz build/fuzz/NAME for SECONDS on tests/fuzz/corpus-new/NAME/, a
#       scratch copy of the committed corpus (new inputs accumulate there);
#       crashes go to build/fuzz/artifacts/NAME/; the full log to
#       build/fuzz/NAME.log.  Prints a one-line summary with the exec count;
#       exits non-zero if the fuzzer found a failure.
#   tests/fuzz/run.sh --merge NAME
#       Add the inputs of corpus-new/NAME/ that bring new coverage to
#       tests/fuzz/corpus/NAME/ (libFuzzer -merge=1).  Coverage here means
#       edges only (-use_counters=0): counting hit counts as well would keep
#       hundreds of near-duplicates, and the committed corpus must stay small.
set -u
cd "$(dirname "$0")/../.."

merge=0
if [ "${1:-}" = "--merge" ]; then merge=1; shift; fi
name=${1:?usage: run.sh [--merge] NAME [SECONDS [flags...]]}
shift
bin=build/fuzz/$name
corpus=tests/fuzz/corpus/$name
new=tests/fuzz/corpus-new/$name
art=build/fuzz/artifacts/$name
log=build/fuzz/$name.log
[ -x "$bin" ] || { echo "fuzz $name: $bin missing (make fuzz-build)"; exit 1; }
mkdir -p "$corpus" "$new" "$art"
count() { find "$1" -maxdepth 1 -type f ! -name '.*' | wc -l; }

if [ "$merge" = 1 ]; then
    before=$(count "$corpus")
    "$bin" -merge=1 -use_counters=0 "$corpus" "$new" >"$log.merge" 2>&1 || {
        echo "fuzz $name: merge failed (log: $log.merge)"; tail -n 20 "$log.merge"; exit 1; }
    echo "fuzz $name: corpus $before -> $(count "$corpus") files (from $(count "$new") in $new)"
    exit 0
fi

secs=${1:-60}
shift || true
[ -d "$corpus" ] && cp -n "$corpus"/* "$new"/ 2>/dev/null
start=$(count "$new")
dict=()
[ -f "tests/fuzz/$name.dict" ] && dict=("-dict=tests/fuzz/$name.dict")
"$bin" -max_total_time="$secs" -print_final_stats=1 -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$art/" "${dict[@]}" "$@" "$new" \
    >"$log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
echo "fuzz $name: ${execs:-?} execs in ${secs}s, ${cov:-cov: ?}," \
     "corpus-new $start -> $(count "$new") files"
if [ "$rc" -ne 0 ]; then
    echo "fuzz $name: FAILED (exit $rc; log: $log); artifacts:"
    ls "$art" | sed 's/^/    /'
    grep -m 5 -E 'ERROR|FUZZ_CHECK|Assertion|runtime error' "$log" | sed 's/^/    /'
fi
exit "$rc"
