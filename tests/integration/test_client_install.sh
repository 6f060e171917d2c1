#!/usr/bin/env bash
# make install (libfence + fencectl) into a temporary PREFIX; a program built
# against it with pkg-config (shared and static) takes a lock from a real
# fenced; the shared library exports only the public fence_* API.
. "$(dirname "$0")/../lib/lib.sh"
[ -x "$FENCED" ] || skip_all "$FENCED not built"
command -v pkg-config >/dev/null || skip_all "no pkg-config"
P=$TEST_TMP/prefix
make -s -C "$ROOT" install-lib install-cli PREFIX="$P" >"$TEST_TMP/install.log" 2>&1
check "make install PREFIX=... succeeds" [ $? -eq 0 ] || cat "$TEST_TMP/install.log"
for f in include/fence.h lib/libfence.a lib/libfence.so.0 lib/libfence.so \
         lib/pkgconfig/libfence.pc bin/fencectl share/man/man1/fencectl.1; do
    check "installed $f" [ -e "$P/$f" ]
done
export PKG_CONFIG_PATH=$P/lib/pkgconfig
check_eq "pkg-config finds libfence" 0.1.0 "$(pkg-config --modversion libfence)"
check_eq "its prefix is the install prefix" "$P" "$(pkg-config --variable=prefix libfence)"

exported=$(nm -D --defined-only "$P/lib/libfence.so.0" | awk '$2 == "T" {print $3}')
check "the shared library exports fence_lock_acquire" grep -qx fence_lock_acquire <<<"$exported"
check_eq "and nothing but fence_* (internals stay hidden)" "" "$(grep -v '^fence_' <<<"$exported")"

cat >"$TEST_TMP/app.c" <<'C'
#include <fence.h>
#include <stdio.h>
int main(void)
{
    fence_client_opts o;
    fence_client_opts_init(&o);
    fence_client *c;
    if (fence_client_open(&o, &c) != 0)
        return 2;
    fence_lock *l;
    int rc = fence_lock_acquire(c, "install.test", 2000, 1000, &l);
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", fence_strerror(rc), fence_client_errmsg(c));
        return 1;
    }
    printf("token %llu\n", (unsigned long long)fence_lock_token(l));
    rc = fence_lock_release(l);
    fence_client_close(c);
    return rc != 0;
}
C
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$TEST_TMP/app" "$TEST_TMP/app.c" $(pkg-config --cflags --libs libfence)
check "a program builds against the installed header and shared library" [ $? -eq 0 ]
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$TEST_TMP/app_static" "$TEST_TMP/app.c" \
    $(pkg-config --cflags libfence) "$P/lib/libfence.a" $(pkg-config --static --libs-only-l libfence | sed 's/-lfence//')
check "and statically" [ $? -eq 0 ]

port=$(free_port)
spawn fenced "$FENCED" --port "$port" --data-dir "$TEST_TMP/fenced"
wait_port "$port" 20 || { not_ok "fenced listens"; finish; }
export FENCE_SERVER=127.0.0.1:$port
out=$(LD_LIBRARY_PATH=$P/lib "$TEST_TMP/app")
check "the shared build takes a lock ($out)" grep -q '^token [1-9]' <<<"$out"
out=$("$TEST_TMP/app_static")
check "the static build takes a lock ($out)" grep -q '^token [1-9]' <<<"$out"
check_eq "the installed fencectl works" free "$("$P/bin/fencectl" info install.test)"
finish
