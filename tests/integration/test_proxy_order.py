#!/usr/bin/python3
"""fence-proxy's ordering rule, against an upstream we control (a Python
http.server that sleeps X-Sleep-Ms per request and records when each
request arrives and ends):

- a higher token that arrives while a lower one is in flight for the same
  fence is forwarded only after the lower one finished;
- requests with the same token run concurrently;
- different fences never wait for each other;
- a lower token arriving while a higher one waits is refused at once (409);
- drain timeout, --drain-action fail: the old request is aborted (504), the
  waiting one refused (503 DRAIN), and a retry goes through;
- drain timeout, --drain-action proceed: the old one aborted (504), the
  waiting one forwarded;
- --max-inflight: a request beyond it gets 503 BUSY.
"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_proxy_lib import (Proxy, SlowUpstream, Tap, fenced_headers,  # noqa: E402
                            make_tmp, need_proxy, request)

need_proxy()
tap = Tap()
TMP = make_tmp("fence-proxy-order.")


def put_async(port, path, body, lock, token, sleep_ms, results, key):
    """PUT in a thread; results[key] = (status, headers, body, t_done)."""
    def run():
        h = fenced_headers(lock, token)
        h["X-Sleep-Ms"] = str(sleep_ms)
        try:
            st, hd, b = request(port, "PUT", path, body, h)
            results[key] = (st, hd, b, time.monotonic())
        except Exception as e:  # noqa: BLE001 - recorded as a failure
            results[key] = (None, {}, repr(e).encode(), time.monotonic())
    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


def wait_event(up, kind, body, secs=10.0):
    """The time of the first upstream event (kind, body), or None."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        for ev in up.snapshot():
            if ev[0] == kind and ev[4] == body:
                return ev[1]
        time.sleep(0.005)
    return None


def test_higher_waits(up, px):
    res = {}
    t1 = put_async(px.port, "/o", b"t33", "order", 33, 1000, res, 33)
    s33 = wait_event(up, "start", b"t33")
    tap.check(s33 is not None, "token 33 reached the upstream")
    t2 = put_async(px.port, "/o", b"t34", "order", 34, 0, res, 34)
    t1.join(10)
    t2.join(10)
    e33 = wait_event(up, "end", b"t33")
    s34 = wait_event(up, "start", b"t34")
    tap.eq(200, res.get(33, (None,))[0], "token 33 answered 200")
    tap.eq(200, res.get(34, (None,))[0], "token 34 answered 200 after it")
    tap.check(e33 is not None and s34 is not None and s34 >= e33,
              "token 34 was forwarded only after token 33 finished at the upstream",
              "33 ended %r, 34 started %r" % (e33, s34))


def test_same_token_concurrent(up, px):
    res = {}
    ths = [put_async(px.port, "/s%d" % i, b"same%d" % i, "same", 40, 800, res, i) for i in range(3)]
    for th in ths:
        th.join(10)
    starts = [wait_event(up, "start", b"same%d" % i) for i in range(3)]
    ends = [wait_event(up, "end", b"same%d" % i) for i in range(3)]
    ok = all(s is not None for s in starts) and all(e is not None for e in ends)
    tap.check(ok and max(starts) < min(ends),
              "three requests with the same token were at the upstream together",
              "starts %r ends %r" % (starts, ends))
    tap.eq([200, 200, 200], [res.get(i, (None,))[0] for i in range(3)], "all three answered 200")


def test_fences_independent(up, px):
    res = {}
    ta = put_async(px.port, "/a", b"fa", "fence-a", 50, 1000, res, "a")
    wait_event(up, "start", b"fa")
    tb = put_async(px.port, "/b", b"fb", "fence-b", 7, 0, res, "b")
    tb.join(10)
    ta.join(10)
    sb = wait_event(up, "start", b"fb")
    ea = wait_event(up, "end", b"fa")
    tap.check(sb is not None and ea is not None and sb < ea,
              "a request on another fence did not wait for fence-a's in-flight request")
    tap.eq((200, 200), (res.get("a", (None,))[0], res.get("b", (None,))[0]),
           "both fences answered 200")


def test_lower_behind_higher(up, px):
    res = {}
    t1 = put_async(px.port, "/l", b"t60", "low", 60, 1000, res, 60)
    wait_event(up, "start", b"t60")
    t2 = put_async(px.port, "/l", b"t61", "low", 61, 0, res, 61)
    time.sleep(0.2)
    st, hd, body = request(px.port, "PUT", "/l", b"t60b", fenced_headers("low", 60))
    tap.eq(409, st, "token 60 again, while 61 waits for the first 60: 409")
    tap.eq("61", hd.get("fencing-highest"), "Fencing-Highest names the waiting 61")
    tap.check(body.startswith(b"STALE 60 61 "), "the body is 'STALE 60 61 ...'", body)
    t1.join(10)
    t2.join(10)
    tap.eq((200, 200), (res.get(60, (None,))[0], res.get(61, (None,))[0]),
           "the first 60 and then 61 answered 200")
    tap.check(wait_event(up, "start", b"t60b", secs=0.1) is None,
              "the refused 60 never reached the upstream")


def test_drain_fail(up):
    px = Proxy(TMP, up.port, name="proxy-drain-fail",
               args=["--drain-timeout-ms", "400", "--log-level", "debug"]).start()
    res = {}
    t1 = put_async(px.port, "/d", b"t70", "drain", 70, 3000, res, 70)
    wait_event(up, "start", b"t70")
    t0 = time.monotonic()
    st, hd, body = request(px.port, "PUT", "/d", b"t71", fenced_headers("drain", 71))
    waited = time.monotonic() - t0
    tap.eq(503, st, "drain timeout (fail): the waiting token 71 is refused with 503")
    tap.check(body.startswith(b"DRAIN "), "its body starts 'DRAIN'", body)
    tap.check(0.3 <= waited < 2.5, "it waited about --drain-timeout-ms (%.2f s)" % waited)
    t1.join(5)
    tap.eq(504, res.get(70, (None,))[0], "the old token 70 that never finished got 504")
    tap.check(b"outcome is" in res.get(70, (0, 0, b""))[2], "its body says the outcome is unknown",
              res.get(70))
    tap.check(wait_event(up, "start", b"t71", secs=0.1) is None,
              "the refused 71 was not forwarded")
    st, hd, body = request(px.port, "PUT", "/d", b"t71r", fenced_headers("drain", 71))
    tap.eq(200, st, "a retry of token 71 goes through at once")
    st, hd, body = request(px.port, "PUT", "/d", b"t70r", fenced_headers("drain", 70))
    tap.eq(409, st, "token 70 is stale after 71 was admitted")
    tap.check(px.alive(), "the proxy is still up", px.log_text())
    px.stop()


def test_drain_proceed(up):
    px = Proxy(TMP, up.port, name="proxy-drain-proceed",
               args=["--drain-timeout-ms", "400", "--drain-action", "proceed"]).start()
    res = {}
    t1 = put_async(px.port, "/p", b"t80", "proceed", 80, 3000, res, 80)
    wait_event(up, "start", b"t80")
    t0 = time.monotonic()
    st, hd, body = request(px.port, "PUT", "/p", b"t81", fenced_headers("proceed", 81))
    waited = time.monotonic() - t0
    tap.eq(200, st, "drain timeout (proceed): the waiting token 81 is forwarded")
    tap.check(0.3 <= waited < 2.5, "after about --drain-timeout-ms (%.2f s)" % waited)
    t1.join(5)
    tap.eq(504, res.get(80, (None,))[0], "the old token 80 got 504")
    px.stop()


def test_max_inflight(up):
    px = Proxy(TMP, up.port, name="proxy-inflight", args=["--max-inflight", "2"]).start()
    res = {}
    ths = [put_async(px.port, "/i%d" % i, b"if%d" % i, "inflight-%d" % i, 1, 1000, res, i)
           for i in range(2)]
    wait_event(up, "start", b"if0")
    wait_event(up, "start", b"if1")
    st, _, body = request(px.port, "PUT", "/i2", b"if2", fenced_headers("inflight-2", 1))
    tap.check(st == 503 and body.startswith(b"BUSY"), "a third request with --max-inflight 2: 503 BUSY",
              (st, body))
    for th in ths:
        th.join(10)
    tap.eq((200, 200), (res.get(0, (None,))[0], res.get(1, (None,))[0]), "the two in flight answered 200")
    st, _, _ = request(px.port, "PUT", "/i2", b"if2b", fenced_headers("inflight-2", 1))
    tap.eq(200, st, "once they finished, a new request is accepted")
    px.stop()


def main():
    up = SlowUpstream()
    px = Proxy(TMP, up.port, args=["--log-level", "debug"]).start()
    try:
        for fn in (test_higher_waits, test_same_token_concurrent, test_fences_independent,
                   test_lower_behind_higher):
            try:
                fn(up, px)
            except Exception as e:  # noqa: BLE001
                import traceback
                traceback.print_exc(file=sys.stdout)
                tap.check(False, "%s crashed: %r" % (fn.__name__, e))
        tap.check(px.alive(), "the proxy is still up", px.log_text())
        px.stop()
        for fn in (test_drain_fail, test_drain_proceed, test_max_inflight):
            try:
                fn(up)
            except Exception as e:  # noqa: BLE001
                import traceback
                traceback.print_exc(file=sys.stdout)
                tap.check(False, "%s crashed: %r" % (fn.__name__, e))
    finally:
        up.close()
    tap.finish()


if __name__ == "__main__":
    main()
