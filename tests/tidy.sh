#!/usr/bin/env bash
# tidy: src/core must stay deterministic and self-contained.  Greps the
# core's sources (comments stripped) for calls and includes that would bring
# in a clock, randomness, I/O or the C allocator, and checks the compiled
# objects for writable globals.  Prints ok / not ok lines for tests/run.sh.
set -u
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
CORE=${TIDY_CORE_DIR:-$ROOT/src/core}
fails=0
ok()     { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; fails=$((fails + 1)); }

files=$(find "$CORE" -name '*.[ch]' | sort)
[ -n "$files" ] || { not_ok "no sources under src/core"; exit 1; }

# Source with comments and string literals removed (the preprocessor in
# -fpreprocessed mode strips comments without expanding anything).
strip_file() {
    ${CC:-cc} -fpreprocessed -dD -E -P -x c "$1" 2>/dev/null |
        sed -E 's/"([^"\\]|\\.)*"/""/g'
}
work=$(mktemp -d /tmp/fence-tidy.XXXXXX)
trap 'rm -rf "$work"' EXIT
for f in $files; do
    strip_file "$f" >"$work/$(basename "$f").stripped"
done
stripped() { cat "$work/$(basename "$1").stripped"; }

# ban "what" 'extended regex': no core file may match.
ban() {
    local what=$1 re=$2 f hits=""
    for f in $files; do
        if stripped "$f" | grep -Eq -- "$re"; then
            hits="$hits ${f#"$ROOT"/}"
        fi
    done
    if [ -z "$hits" ]; then ok "src/core has no $what"; else not_ok "src/core uses $what:$hits"; fi
}

ban "time()"            '(^|[^A-Za-z0-9_.>])time[[:space:]]*\('
ban "clock_gettime"     'clock_gettime'
ban "gettimeofday"      'gettimeofday'
ban "rand()"            '(^|[^A-Za-z0-9_])s?rand(_r)?[[:space:]]*\('
ban "random()"          '(^|[^A-Za-z0-9_])s?random[[:space:]]*\('
ban "malloc()"          '(^|[^A-Za-z0-9_])malloc[[:space:]]*\('
ban "calloc()"          '(^|[^A-Za-z0-9_])calloc[[:space:]]*\('
ban "realloc()"         '(^|[^A-Za-z0-9_])realloc[[:space:]]*\('
# free( is allowed only as the injected allocator's member (a.free(...),
# f->alloc.free(...)); fence__free( does not match.
ban "free() outside the allocator indirection" '(^|[^A-Za-z0-9_.>])free[[:space:]]*\('
ban "printf()"          'printf[[:space:]]*\('
ban "fopen()"           'fopen[[:space:]]*\('
ban "<uv.h>"            '#[[:space:]]*include[[:space:]]*<uv\.h>'
ban "<time.h>"          '#[[:space:]]*include[[:space:]]*<(sys/)?time\.h>'
ban "<sys/socket.h>"    '#[[:space:]]*include[[:space:]]*<sys/socket\.h>'
ban "<stdio.h>"         '#[[:space:]]*include[[:space:]]*<stdio\.h>'
ban "raw assert() (FENCE_ASSERT stays on with NDEBUG)" '(^|[^A-Za-z0-9_])assert[[:space:]]*\('
# Byte order goes through src/common/bytes.h, not a private copy.
LE_RE='(<<|>>)[[:space:]]*\(?8[[:space:]]*\*[[:space:]]*[a-z]'
ban "a hand-written little-endian loop (use common/bytes.h)" "$LE_RE"

# Planted bugs live as patches under tests/mutants/, never as #ifdefs in
# the tree (any directory of src/).
BUG_RE='#[[:space:]]*if(n?def|[[:space:]]+(!?[[:space:]]*)?defined)[[:space:](]*FENCE_(BUG|MUTANT)'
bug_hits=$(grep -rlE -- "$BUG_RE" "$ROOT/src" 2>/dev/null | sed "s|^$ROOT/||" | tr '\n' ' ')
if [ -z "$bug_hits" ]; then ok "src/ has no planted-bug #ifdef (FENCE_BUG*, FENCE_MUTANT)"
else not_ok "src/ has planted-bug #ifdefs: $bug_hits"; fi

# The regexes themselves must catch what they are meant to catch.
probe=$work/probe.c
printf '#include <stdio.h>\n#ifdef FENCE_BUG_X\nvoid g(void){ void *p = malloc(3); free(p); x = time(NULL); y = v >> (8 * i); }\n#endif\n' >"$probe"
strip_file "$probe" >"$work/probe.c.stripped"
if stripped "$probe" | grep -Eq '(^|[^A-Za-z0-9_])malloc[[:space:]]*\(' &&
   stripped "$probe" | grep -Eq '(^|[^A-Za-z0-9_.>])free[[:space:]]*\(' &&
   stripped "$probe" | grep -Eq '(^|[^A-Za-z0-9_.>])time[[:space:]]*\(' &&
   stripped "$probe" | grep -Eq '#[[:space:]]*include[[:space:]]*<stdio\.h>' &&
   stripped "$probe" | grep -Eq -- "$LE_RE" &&
   grep -Eq -- "$BUG_RE" "$probe"; then
    ok "tidy's patterns catch a planted violation"
else
    not_ok "tidy's patterns miss a planted violation"
fi

# No writable globals: the core's objects define no data or bss symbols.
lib=$BUILD/libfencecore.a
if [ -f "$lib" ] && command -v nm >/dev/null; then
    globals=$(nm "$lib" 2>/dev/null | awk '$2 ~ /^[BbDdCcGgSs]$/ {print $3}' | sort -u | tr '\n' ' ')
    if [ -z "$globals" ]; then ok "src/core objects define no writable globals"
    else not_ok "src/core objects define writable globals: $globals"; fi
else
    echo "# $lib not built; global check skipped"
fi

echo "# tidy: $fails problem(s)"
[ "$fails" -eq 0 ]
