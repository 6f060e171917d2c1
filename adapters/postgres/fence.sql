-- fence.sql: fencing tokens for PostgreSQL (tested with PostgreSQL 15).
--
-- Load once per database (loading again is harmless and keeps the marks):
--
--     psql -v ON_ERROR_STOP=1 -d mydb -f adapters/postgres/fence.sql
--
-- The rule: a transaction carrying token T for fence F is admitted iff
-- T >= high(F); admitting raises high(F) to T.  Equal tokens are admitted.
-- Call fence.admit in the same transaction as the writes it protects:
--
--     BEGIN;
--     SELECT fence.admit('orders', $1);          -- $1: the fencing token
--     UPDATE orders SET status = 'shipped' WHERE id = 42;
--     COMMIT;
--
-- fence.admit locks the fence's row until the transaction ends, so the check
-- and the writes are atomic: every other transaction admitting the same fence
-- waits, then sees the raised mark.  A stale token raises SQLSTATE FN001 and
-- the whole transaction rolls back.  The mark is a row written in the same
-- transaction, so it is durable exactly when the writes are (at COMMIT).
--
-- Error codes (class FN, user-defined):
--   FN001  stale token: "STALE <token> <highest>: fencing token <token> for
--          fence '<name>' is older than the highest admitted token <highest>"
--   FN002  invalid fence name (NULL, empty, or longer than 256 bytes)
--   FN003  invalid token (NULL or negative)
--   FN004  wrong fence: "WRONGFENCE key '<key>' belongs to fence '<owner>'"
--   FN005  a fenced table written without fence.admit in the transaction
--
-- Keys bound to one fence (issue 15).  fence.admit alone orders the writes
-- of ONE fence; it cannot know which rows a transaction then writes, so a
-- stale holder of fence F could write F's rows under a fence G it never
-- used (any token is admitted for a new fence).  fence.claim(fence, key)
-- binds key to fence on first use (table fence.keys, in the caller's
-- transaction) and raises FN004 if key already belongs to another fence;
-- the trigger function fence.guard(key_column) does it for every row a
-- table's INSERT/UPDATE/DELETE touches, with the fence this transaction
-- admitted last:
--
--     CREATE TRIGGER orders_fence BEFORE INSERT OR UPDATE OR DELETE ON orders
--         FOR EACH ROW EXECUTE FUNCTION fence.guard('id');
--
-- A write to such a table in a transaction that admitted no fence is
-- refused (FN005).  Bindings outlive the rows (a deleted row cannot be
-- recreated through another fence).
-- Tokens are unsigned 64-bit on the lock service's side; bigint holds
-- 0 .. 9223372036854775807 (2^63-1).  A larger token cannot be passed as a
-- bigint, so PostgreSQL refuses the call before fence.admit runs and the
-- transaction is aborted; nothing is admitted.  The error depends on how the
-- token is sent: a bind parameter ($1), a string, or a value cast with
-- ::bigint gives SQLSTATE 22003 ("bigint out of range" / "value ... is out of
-- range for type bigint"); an untyped numeric literal, which is what some
-- drivers (psycopg2) send for a large integer, gives 42883 ("function
-- fence.admit(unknown, numeric) does not exist").  Negative tokens get FN003.
-- fenced issues tokens from 1 upwards; it would need 2^63 grants to get there.
--
-- Privileges: the functions run with the rights of the role that loaded this
-- file (SECURITY DEFINER, with a fixed search_path), so applications need no
-- rights on the table and cannot lower a mark by hand.  Grant them:
--     GRANT USAGE ON SCHEMA fence TO app;
--     GRANT EXECUTE ON FUNCTION fence.admit(text, bigint), fence.high(text) TO app;
-- (and fence.claim(text, text) for explicit claims; the trigger needs no
-- grant).
--
-- See adapters/postgres/README.md for the read-modify-write pattern (admit
-- before you read) and the operational notes.

BEGIN;

SET LOCAL client_min_messages = warning;

CREATE SCHEMA IF NOT EXISTS fence;
COMMENT ON SCHEMA fence IS
    'Fencing-token high-water marks (adapters/postgres/fence.sql of fenced).';

-- One row per fence: the highest token admitted so far.  A fence without a
-- row has mark 0.
CREATE TABLE IF NOT EXISTS fence.marks (
    name       text        NOT NULL,
    token      bigint      NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT marks_pkey PRIMARY KEY (name),
    CONSTRAINT marks_name_length CHECK (octet_length(name) BETWEEN 1 AND 256),
    CONSTRAINT marks_token_nonnegative CHECK (token >= 0)
);
COMMENT ON TABLE fence.marks IS
    'Highest fencing token admitted per fence; change it only through fence.admit.';
COMMENT ON COLUMN fence.marks.name IS 'Fence name, 1..256 bytes.';
COMMENT ON COLUMN fence.marks.token IS 'Highest token admitted (the high-water mark).';
COMMENT ON COLUMN fence.marks.updated_at IS 'Start time of the transaction that last raised the mark.';
REVOKE ALL ON TABLE fence.marks FROM PUBLIC;

-- One row per claimed key: the fence it belongs to.
CREATE TABLE IF NOT EXISTS fence.keys (
    key      text        NOT NULL,
    fence    text        NOT NULL,
    bound_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT keys_pkey PRIMARY KEY (key),
    CONSTRAINT keys_fence_length CHECK (octet_length(fence) BETWEEN 1 AND 256)
);
COMMENT ON TABLE fence.keys IS
    'The fence each claimed key belongs to (bound on first claim); change it only through fence.claim.';
REVOKE ALL ON TABLE fence.keys FROM PUBLIC;

-- fence.check_name(name): raise FN002 unless name is 1..256 bytes.  The one
-- name check of fence.admit and fence.claim.
CREATE OR REPLACE FUNCTION fence.check_name(name text)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF check_name.name IS NULL OR octet_length(check_name.name) < 1 OR octet_length(check_name.name) > 256 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'FN002',
            MESSAGE = format('invalid fence name: must be 1..256 bytes, got %s',
                             coalesce(octet_length(check_name.name)::text || ' bytes', 'NULL'));
    END IF;
END
$fn$;

-- fence.admit(name, token): admit token for fence name in the caller's
-- transaction, or raise FN001 if it is stale.  Returns the mark after the
-- call (equal to token).
--
-- Step 1 makes sure the row exists without ever blocking on a different
-- fence: INSERT ... ON CONFLICT DO NOTHING waits only for a concurrent
-- transaction inserting the same name.  Step 2 takes the row lock, which is
-- held until the caller's transaction ends; that is what serializes
-- transactions on one fence and makes check + writes atomic.  Under READ
-- COMMITTED, a transaction that waited for the lock reads the row as the
-- previous holder committed it, so it compares against the newest mark.
-- Under REPEATABLE READ or SERIALIZABLE, PostgreSQL raises a serialization
-- failure (40001) instead, which also rolls back; the caller may retry.
CREATE OR REPLACE FUNCTION fence.admit(name text, token bigint)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    high bigint;
BEGIN
    PERFORM fence.check_name(admit.name);
    IF admit.token IS NULL OR admit.token < 0 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'FN003',
            MESSAGE = format('invalid fencing token %s for fence %L: tokens are 0..9223372036854775807',
                             coalesce(admit.token::text, 'NULL'), admit.name);
    END IF;

    INSERT INTO fence.marks AS m (name, token) VALUES (admit.name, 0)
        ON CONFLICT ON CONSTRAINT marks_pkey DO NOTHING;

    SELECT m.token INTO high FROM fence.marks AS m WHERE m.name = admit.name FOR UPDATE;
    IF NOT FOUND THEN
        -- The row exists (the insert found it) but this transaction's
        -- snapshot cannot see it: only possible above READ COMMITTED.
        RAISE EXCEPTION USING
            ERRCODE = '40001',
            MESSAGE = format('could not serialize access to fence %L (created by a concurrent transaction)',
                             admit.name),
            HINT = 'Retry the transaction.';
    END IF;

    IF admit.token < high THEN
        RAISE EXCEPTION USING
            ERRCODE = 'FN001',
            MESSAGE = format('STALE %s %s: fencing token %s for fence %L is older than the highest admitted token %s',
                             admit.token, high, admit.token, admit.name, high),
            DETAIL = format('fence=%s token=%s highest=%s', admit.name, admit.token, high),
            HINT = 'A newer lock holder has written; this holder must stop. Do not retry with the same token.';
    END IF;

    IF admit.token > high THEN
        UPDATE fence.marks AS m SET token = admit.token, updated_at = now() WHERE m.name = admit.name;
    END IF;
    -- The fence this transaction admitted last, for fence.guard.
    PERFORM set_config('fence.current', admit.name, true);
    RETURN admit.token;
END
$fn$;
COMMENT ON FUNCTION fence.admit(text, bigint) IS
    'Admit a fencing token in the current transaction (raises FN001 if stale); call before the writes.';

-- fence.high(name): the mark of fence name, 0 if it was never admitted.  It
-- takes no lock; inside a transaction that admitted name it is that token.
CREATE OR REPLACE FUNCTION fence.high(name text)
RETURNS bigint
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce((SELECT m.token FROM fence.marks AS m WHERE m.name = $1), 0);
$fn$;
COMMENT ON FUNCTION fence.high(text) IS 'Highest fencing token admitted for a fence (0 if none).';

-- fence.claim(name, key): key belongs to fence name from now on, or raise
-- FN004 if it already belongs to another fence.  Concurrent first claims of
-- one key serialize on the key's row: the INSERT of the second waits for
-- the first transaction, then (READ COMMITTED) sees its binding.
CREATE OR REPLACE FUNCTION fence.claim(name text, key text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    owner text;
BEGIN
    PERFORM fence.check_name(claim.name);
    IF claim.key IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'FN004', MESSAGE = 'WRONGFENCE a NULL key cannot be claimed';
    END IF;
    INSERT INTO fence.keys AS k (key, fence) VALUES (claim.key, claim.name)
        ON CONFLICT ON CONSTRAINT keys_pkey DO NOTHING;
    SELECT k.fence INTO owner FROM fence.keys AS k WHERE k.key = claim.key;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING
            ERRCODE = '40001',
            MESSAGE = format('could not serialize access to key %L (claimed by a concurrent transaction)',
                             claim.key),
            HINT = 'Retry the transaction.';
    END IF;
    IF owner <> claim.name THEN
        RAISE EXCEPTION USING
            ERRCODE = 'FN004',
            MESSAGE = format('WRONGFENCE key %L belongs to fence %L; a key is written only through the fence that first wrote it',
                             claim.key, owner),
            DETAIL = format('key=%s fence=%s owner=%s', claim.key, claim.name, owner),
            HINT = 'Nothing in this transaction is committed.';
    END IF;
END
$fn$;
COMMENT ON FUNCTION fence.claim(text, text) IS
    'Bind a key to a fence on first use; raises FN004 if it belongs to another fence.';

-- fence.guard(key_column): a row trigger that claims '<schema>.<table>/<key>'
-- for the fence admitted last in this transaction, for the old and the new
-- row alike (an UPDATE may move a row to another key).
CREATE OR REPLACE FUNCTION fence.guard()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    f text := current_setting('fence.current', true);
    col text;
    prefix text := TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME || '/';
BEGIN
    IF TG_NARGS <> 1 THEN
        RAISE EXCEPTION 'fence.guard needs one argument: the key column';
    END IF;
    col := TG_ARGV[0];
    IF f IS NULL OR f = '' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'FN005',
            MESSAGE = format('table %s.%s is fenced: call fence.admit in this transaction before writing it',
                             TG_TABLE_SCHEMA, TG_TABLE_NAME);
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM fence.claim(f, prefix || (to_jsonb(OLD) ->> col));
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM fence.claim(f, prefix || (to_jsonb(NEW) ->> col));
        RETURN NEW;
    END IF;
    RETURN OLD;
END
$fn$;
COMMENT ON FUNCTION fence.guard() IS
    'Row trigger: every written row''s key belongs to the fence admitted last in the transaction.';

REVOKE ALL ON FUNCTION fence.check_name(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.claim(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.admit(text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.high(text) FROM PUBLIC;

COMMIT;
