#!/usr/bin/env bash
# The body of the core's control runs (core_, multi_ and heap_bug_control.sh),
# sourced by them: bug_control MUTANT TEST... builds the named core test
# programs against tests/mutants/MUTANT.patch with tests/mutants/build.sh
# and expects every one of them to FAIL.  A test suite that passes against
# the bug would prove nothing; a patch that no longer applies fails the
# control loudly.  The release build's mutant directories are the ones the
# simulation's controls use (mk/sim.mk), so the core is compiled once per
# mutant.
bug_control() {
    local mutant=$1
    shift
    local root=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
    local build=${BUILD:-$root/build/release}
    cd "$root" || return 1
    command -v "${CC:-cc}" >/dev/null || { echo "# skipped: no C compiler"; return 77; }
    local out=$build/mutant/$mutant log t rc fails=0
    log=$(mktemp /tmp/fence-bugctl.XXXXXX)
    local targets=()
    for t in "$@"; do targets+=("tests/$t"); done
    if ! bash tests/mutants/build.sh "$mutant" "$out" "${targets[@]}" >"$log" 2>&1; then
        sed 's/^/# /' "$log" | tail -n 20
        echo "not ok - the $mutant mutant builds (tests/mutants/build.sh)"
        rm -f "$log"
        return 1
    fi
    for t in "$@"; do
        FENCE_SEEDS=300 "$out/tests/$t" >"$log" 2>&1
        rc=$?
        if [ "$rc" -ne 0 ] && grep -q '^not ok' "$log"; then
            echo "ok - $t detects the planted bug: $(grep -c '^not ok' "$log") cases fail, e.g. $(grep -m1 '^not ok' "$log" | sed 's/^not ok - //')"
            grep -m2 '^#   seed' "$log" || true
        else
            tail -n 5 "$log" | sed 's/^/# /'
            echo "not ok - $t passes against the planted bug (exit $rc)"
            fails=$((fails + 1))
        fi
    done
    rm -f "$log"
    [ "$fails" -eq 0 ]
}
