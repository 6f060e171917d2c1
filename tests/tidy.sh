#!/usr/bin/env bash
# tidy: src/core must stay deterministic and self-contained.  Greps the
# core's sources (comments stripped) for calls and includes that would bring
# in a clock, randomness, I/O or the C allocator, and checks the compiled
# objects for writable globals.  Then the tree-wide conventions that a grep
# or nm can check (docs/conventions.md; FENCE_ASSERT-only is
# tests/tidy_asserts.sh): include guards, libraries that do not log, one
# FNV-1a, .c files under 1,000 lines (src/ and tests/), exported names with
# the fence_ prefix.  Every pattern is first run against a
# planted violation, so a check that cannot fail is itself a failure.
# Prints ok / not ok lines for tests/run.sh.
set -u
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
# The objects live in build/<variant>/ (Makefile: BUILD ?= build/$(VARIANT)).
if [ ! -d "$BUILD/src" ] && [ -d "$ROOT/build/release/src" ]; then
    BUILD=$ROOT/build/release
fi
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
# Byte order goes through src/base/bytes.h, not a private copy.
LE_RE='(<<|>>)[[:space:]]*\(?8[[:space:]]*\*[[:space:]]*[a-z]'
ban "a hand-written little-endian loop (use base/bytes.h)" "$LE_RE"

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

# ---- Tree-wide conventions (docs/conventions.md) -------------------------
SRC=${TIDY_SRC_DIR:-$ROOT/src}
INC=${TIDY_INCLUDE_DIR:-$ROOT/include}
SIM=${TIDY_SIM_DIR:-$ROOT/tests/sim}
rel() { echo "${1#"$ROOT"/}"; }

# bad_guard HEADER...: headers whose first #ifndef and #define do not name
# the same FENCE* macro (the include guard).
bad_guard() {
    local f a b
    for f in "$@"; do
        a=$(grep -m1 -E '^#[[:space:]]*ifndef[[:space:]]' "$f" | awk '{print $2}')
        b=$(grep -m1 -E '^#[[:space:]]*define[[:space:]]' "$f" | awk '{print $2}')
        case $a in FENCE*) [ "$a" = "$b" ] && continue ;; esac
        rel "$f"
    done
}

# logging FILE...: library files that log (only daemons and the CLI do;
# libraries return codes and messages).
LOG_RE='#[[:space:]]*include[[:space:]]*"(base|server)/log\.h"|FENCE_LOG(_[DIWE])?[[:space:]]*\('
logging() {
    local f
    for f in "$@"; do
        strip_file "$f" | grep -Eq -- "$LOG_RE" && rel "$f"
    done
}

# fnv_copy FILE...: files other than base/hash.h with an FNV prime or
# offset basis in their code (a private FNV-1a; use base/hash.h).
FNV_RE='1099511628211|0x0*100000001b3|14695981039346656037|0xcbf29ce484222325|16777619|0x0*1000193|2166136261|0x811c9dc5'
fnv_copy() {
    local f
    for f in "$@"; do
        case $f in */src/base/hash.h) continue ;; esac
        strip_file "$f" | grep -Eiq -- "$FNV_RE" && rel "$f"
    done
}

# hex_copy FILE...: files other than base/hex.h that decode a hex digit
# by hand (c - 'a' + 10; use base/hex.h's fence__hexval).
HEX_RE="-[[:space:]]*'[aA]'[[:space:]]*\\+[[:space:]]*10([^0-9]|$)"
hex_copy() {
    local f
    for f in "$@"; do
        case $f in */src/base/hex.h) continue ;; esac
        strip_file "$f" | grep -Eq -- "$HEX_RE" && rel "$f"
    done
}

# too_long FILE...: .c files of 1,000 lines or more (no exceptions: split
# a file by concern before it gets there).
too_long() {
    local f n
    for f in "$@"; do
        n=$(wc -l <"$f")
        [ "$n" -lt 1000 ] && continue
        echo "$(rel "$f")($n)"
    done
}

# unprefixed OBJECT...: global symbols an object defines that do not start
# with fence_ (fence__ for internal ones), FENCE_, or fencectl_ (the CLI's
# own files).  Allowed: main, and aio_reap.o's syscall (it interposes
# glibc's, see src/server/aio_reap.c).
unprefixed() {
    local o
    for o in "$@"; do
        nm -g --defined-only "$o" 2>/dev/null |
            awk '$2 ~ /^[A-Z]$/ && $2 != "U" && $2 != "W" && $2 != "V" {print $3}' |
            grep -vE '^(fence_|fencectl_|FENCE_|main$)' |
            while read -r sym; do
                case "$(basename "$o"):$sym" in aio_reap.o:syscall) continue ;; esac
                echo "$(rel "$o"):$sym"
            done
    done
}

# stale_names FILE...: fence_*/FENCE_* names that a comment in FILE cites
# and no code among FILE... defines or uses (a comment left behind by a
# rename).  Names ending in _ are prefixes ("fence_store_*"), not names;
# a name that code spells as a string counts as existing.  STALE_OK lists
# names built at run time (compat_info.c's INFO field "<server>_version").
STALE_OK="fence_store_version"
stale_names() {
    STALE_OK=$STALE_OK python3 - "$@" <<'PY'
import os, re, sys
code_ids, refs = set(), []
ok = set(os.environ.get("STALE_OK", "").split())
for f in sys.argv[1:]:
    s = open(f, errors="replace").read()
    for c in re.findall(r"/\*.*?\*/|//[^\n]*", s, re.S):
        refs += [(f, m) for m in re.findall(r"\b(fence_[a-z0-9_]+|FENCE_[A-Z0-9_]+)\b", c)]
    code = re.sub(r"/\*.*?\*/|//[^\n]*", " ", s, flags=re.S)
    code_ids |= set(re.findall(r"\b(fence_[A-Za-z0-9_]+|FENCE_[A-Z0-9_]+)\b", code))
seen = set()
for f, m in refs:
    if m in code_ids or m.endswith("_") or m in ok or (f, m) in seen:
        continue
    seen.add((f, m))
    print("%s:%s" % (f, m))
PY
}

# verdict WHAT HITS: ok when HITS is empty.
verdict() {
    if [ -z "$2" ]; then ok "$1"; else not_ok "$1:$(echo "$2" | tr '\n' ' ')"; fi
}

src_c=$(find "$SRC" "$SIM" -name '*.c' | sort)
# Every other C file under tests/ (unit, fuzz, integration, bench, ...).
TESTS_DIR=${TIDY_TESTS_DIR:-$ROOT/tests}
test_c=$(find "$TESTS_DIR" -name '*.c' -not -path "$SIM/*" | sort)
src_ch=$(find "$SRC" "$SIM" -name '*.[ch]' | sort)
headers=$(find "$SRC" "$INC" -name '*.h' | sort)
libs=$(find "$SRC/libfence" "$SRC/guard" "$SRC/proto" "$SRC/core" -name '*.[ch]' 2>/dev/null | sort)

# shellcheck disable=SC2086  # word splitting of the file lists is wanted
{
verdict "every header has a FENCE* include guard" "$(bad_guard $headers)"
verdict "the libraries (client, guard, proto, core) do not log" "$(logging $libs)"
verdict "FNV-1a lives in src/base/hash.h only" "$(fnv_copy $src_ch)"
verdict "hex digits are decoded by src/base/hex.h only" "$(hex_copy $src_ch)"
if command -v python3 >/dev/null; then
    all_ch=$(find "$SRC" "$INC" "$SIM" -name '*.[ch]' | sort)
    verdict "comments cite only fence_*/FENCE_* names that exist" "$(stale_names $all_ch | sed "s|$ROOT/||")"
else
    echo "# no python3; stale-name check skipped"
fi
verdict "no .c file of 1,000 lines or more (src/, tests/)" "$(too_long $src_c $test_c)"
}
objs=$(find "$BUILD/src" -name '*.o' 2>/dev/null | sort)
if [ -n "$objs" ] && command -v nm >/dev/null; then
    # shellcheck disable=SC2086
    verdict "src/ objects export only fence_* names" "$(unprefixed $objs)"
else
    echo "# $BUILD/src has no objects; symbol-prefix check skipped"
fi

# The same checks against planted violations: each must be caught.
pd=$work/planted
mkdir -p "$pd/src/base"
printf '/* assert(x) in a comment is fine */\nvoid g(void) { _Static_assert(1, "ok"); FENCE_ASSERT(1); }\n' >"$pd/a_ok.c"
printf '#ifndef OTHER_H\n#define OTHER_H\n#endif\n' >"$pd/b.h"
printf '#ifndef FENCE_B_H\n#define FENCE_B_HH\n#endif\n' >"$pd/b2.h"
printf '#ifndef FENCE_B_OK_H\n#define FENCE_B_OK_H\n#endif\n' >"$pd/b_ok.h"
printf '#include "base/log.h"\nvoid h(void) { FENCE_LOG_I("x"); }\n' >"$pd/c.c"
printf 'unsigned long long k(unsigned long long h) { return h * 1099511628211ULL; }\n' >"$pd/d.c"
printf 'unsigned k32(unsigned h) { return h * 0x01000193u; }\n' >"$pd/d2.c"
printf '#define FENCE_FNV64_PRIME 1099511628211ULL\n' >"$pd/src/base/hash.h"
printf 'int hv(char c) { return c >= %sa%s ? c - %sa%s + 10 : c - %s0%s; }\n' "'" "'" "'" "'" "'" "'" >"$pd/h.c"
printf 'char up(char c) { return (char)(c - %sa%s + %sA%s); }\nint b64(char c) { return c - %sa%s + 26; }\n' "'" "'" "'" "'" "'" "'" >"$pd/h_ok.c"
seq 1000 | sed 's|.*|/* line */|' >"$pd/e.c"
printf 'int fence_ok_sym(void) { return 0; }\nint stray_sym(void) { return 1; }\nstatic int quiet(void) { return 2; }\nint fence__also_ok(void) { return quiet(); }\n' >"$pd/f.c"
planted_ok=true
expect() { # expect WHAT GOT WANT
    if [ "$2" != "$3" ]; then
        echo "# planted: $1: got '$2', want '$3'"
        planted_ok=false
    fi
}
ROOT_SAVE=$ROOT; ROOT=$pd
expect "include guard" "$(bad_guard "$pd/b.h" "$pd/b2.h" "$pd/b_ok.h" | tr '\n' ' ')" "b.h b2.h "
expect "logging library" "$(logging "$pd/c.c" "$pd/a_ok.c" | tr '\n' ' ')" "c.c "
expect "FNV copy" "$(fnv_copy "$pd/d.c" "$pd/d2.c" "$pd/src/base/hash.h" "$pd/a_ok.c" | tr '\n' ' ')" "d.c d2.c "
expect "hex copy" "$(hex_copy "$pd/h.c" "$pd/h_ok.c" | tr '\n' ' ')" "h.c "
if command -v python3 >/dev/null; then
    printf '/* See fence_gone_away() and FENCE_NO_SUCH; fence_here is fine. */\nint fence_here(void);\n' >"$pd/g.h"
    expect "stale name" "$(stale_names "$pd/g.h" | sed "s|$pd/||" | tr '\n' ' ')" "g.h:fence_gone_away g.h:FENCE_NO_SUCH "
fi
expect "long file" "$(too_long "$pd/e.c" "$pd/a_ok.c" | tr '\n' ' ')" "e.c(1000) "
if command -v nm >/dev/null && ${CC:-cc} -c -o "$pd/f.o" "$pd/f.c" 2>/dev/null; then
    expect "unprefixed symbol" "$(unprefixed "$pd/f.o" | tr '\n' ' ')" "f.o:stray_sym "
else
    echo "# planted: no cc or nm; symbol-prefix probe skipped"
fi
ROOT=$ROOT_SAVE
if $planted_ok; then ok "the tree-wide checks catch planted violations"
else not_ok "the tree-wide checks miss planted violations"; fi

echo "# tidy: $fails problem(s)"
[ "$fails" -eq 0 ]
