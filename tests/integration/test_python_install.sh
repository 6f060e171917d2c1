#!/usr/bin/env bash
# `pip install ./clients/python` works offline: into a fresh venv (with the
# system site-packages, for Debian's python3-redis), with the package index
# switched off; then the installed package and its fenced-lock command hold
# a lock on a real fenced.  The source is copied first, so the build leaves
# nothing behind in the tree.
. "$(dirname "$0")/../lib/lib.sh"
"$PY" -c 'import redis' 2>/dev/null || skip_all "python3-redis is not installed"
"$PY" -m venv --help >/dev/null 2>&1 || skip_all "python3-venv is not installed"

cp -r "$ROOT/clients/python" "$TEST_TMP/src"
rm -rf "$TEST_TMP/src/build" "$TEST_TMP/src/src/"*.egg-info
"$PY" -m venv --system-site-packages "$TEST_TMP/venv" >"$TEST_TMP/venv.log" 2>&1 ||
    { cat "$TEST_TMP/venv.log"; skip_all "cannot create a venv"; }
V=$TEST_TMP/venv/bin
# No index, no network: only what is installed may be used.
out=$(PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 http_proxy=http://127.0.0.1:9 \
      https_proxy=http://127.0.0.1:9 timeout 120 "$V/pip" install --no-index "$TEST_TMP/src" 2>&1)
rc=$?
check "pip install ./clients/python succeeds offline" test "$rc" -eq 0
[ "$rc" -eq 0 ] || { echo "$out" | tail -n 20 | sed 's/^/# /'; finish; }
check "fenced-lock is installed" test -x "$V/fenced-lock"
where=$(cd / && "$V/python" -c 'import fenced, os; print(os.path.dirname(fenced.__file__))')
case "$where" in "$TEST_TMP/venv/"*) ok "the venv imports its installed copy" ;;
    *) not_ok "the venv imports its installed copy (got $where)" ;; esac
check "the package carries py.typed" test -f "$where/py.typed"

PORT=$(free_port)
spawn fenced "$FENCED" --port "$PORT" --data-dir "$TEST_TMP/data"
wait_port "$PORT" || { cat "$TEST_TMP/fenced.log"; not_ok "fenced starts"; finish; }
wait_ready "$PORT"
out=$(cd / && "$V/fenced-lock" inst --server "127.0.0.1:$PORT" -- sh -c 'echo "token=$FENCE_TOKEN"')
check "the installed fenced-lock holds a lock and runs CMD ($out)" grep -qx 'token=[1-9][0-9]*' <<<"$out"
tok=$(cd / && "$V/python" -c "
import fenced
c = fenced.Client('127.0.0.1:$PORT')
with c.lock('inst2') as l:
    print(l.token)")
check "the installed package locks ($tok)" test "${tok:-0}" -gt 0
tok=$(cd / && "$V/python" -c "
import asyncio, fenced.aio
async def main() -> None:
    c = fenced.aio.Client('127.0.0.1:$PORT')
    async with c.lock('inst3') as l:
        print(l.token)
    await c.close()
asyncio.run(main())")
check "the installed fenced.aio locks ($tok)" test "${tok:-0}" -gt 0
finish
