#!/usr/bin/env bash
# tidy_asserts: asserts stay on in every build.  No source under src/
# (daemons, libraries, proxy, torture kit) may include <assert.h> or call
# assert(), which -DNDEBUG removes; they use FENCE_ASSERT
# (src/base/assert.h).  Test code
# (tests/sim, tests/unit) may keep <assert.h>.  Comments and string literals are
# stripped first; _Static_assert/static_assert are allowed.  As in tidy.sh,
# the patterns are first shown to catch a planted violation.
set -u
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
SRC=${TIDY_SRC_DIR:-$ROOT/src}
fails=0
ok()     { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; fails=$((fails + 1)); }

INCLUDE_RE='#[[:space:]]*include[[:space:]]*<assert\.h>'
CALL_RE='(^|[^A-Za-z0-9_])assert[[:space:]]*\('

# Source with comments and string literals removed.
strip_file() {
    ${CC:-cc} -fpreprocessed -dD -E -P -x c "$1" 2>/dev/null |
        sed -E 's/"([^"\\]|\\.)*"/""/g'
}
work=$(mktemp -d /tmp/fence-tidy-asserts.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The patterns catch a planted violation and spare the allowed forms.
probe=$work/probe.c
printf '/* not <assert.h>, not assert(x) */\n#include <assert.h>\n_Static_assert(1, "assert(");\nvoid g(int x) { assert(x); }\n' >"$probe"
strip_file "$probe" >"$work/probe.stripped"
clean=$work/clean.c
printf '/* #include <assert.h> and assert(x) in a comment */\n#include "base/assert.h"\n_Static_assert(1, "x");\nvoid g(int x) { FENCE_ASSERT(x); static_assert(1, ""); }\n' >"$clean"
strip_file "$clean" >"$work/clean.stripped"
if grep -Eq "$INCLUDE_RE" "$work/probe.stripped" && grep -Eq "$CALL_RE" "$work/probe.stripped" &&
   ! grep -Eq "$INCLUDE_RE" "$work/clean.stripped" && ! grep -Eq "$CALL_RE" "$work/clean.stripped"; then
    ok "the patterns catch a planted <assert.h> and assert(), and spare comments, strings and FENCE_ASSERT"
else
    not_ok "the patterns miss a planted violation or flag an allowed form"
fi

files=$(find "$SRC" -name '*.[ch]' | sort)
[ -n "$files" ] || { not_ok "no sources under $SRC"; exit 1; }
inc=""; call=""; n=0
for f in $files; do
    n=$((n + 1))
    strip_file "$f" >"$work/cur"
    grep -Eq "$INCLUDE_RE" "$work/cur" && inc="$inc ${f#"$ROOT"/}"
    grep -Eq "$CALL_RE" "$work/cur" && call="$call ${f#"$ROOT"/}"
done
if [ -z "$inc" ]; then ok "no file of src/ includes <assert.h> ($n files)"
else not_ok "<assert.h> included by:$inc"; fi
if [ -z "$call" ]; then ok "no file of src/ calls assert() ($n files)"
else not_ok "raw assert() (gone under -DNDEBUG) in:$call"; fi
echo "# tidy_asserts: $fails problem(s)"
[ "$fails" -eq 0 ]
