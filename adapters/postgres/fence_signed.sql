-- fence_signed.sql: signed fencing tokens for PostgreSQL (tested with 15).
--
-- Load after fence.sql, once per database (loading again is harmless):
--
--     psql -v ON_ERROR_STOP=1 -d mydb -f adapters/postgres/fence.sql
--     psql -v ON_ERROR_STOP=1 -d mydb -f adapters/postgres/fence_signed.sql
--
-- fenced can sign each grant (LOCK ... SIGNED; fencectl lock --signed gives
-- $FENCE_SIGNED_TOKEN), and PostgreSQL can check the signature before the
-- mark moves, so a client cannot raise a fence's mark with a made-up number
-- (9223372036854775807 would lock every real holder out for good) or
-- replay another lock's token.  PostgreSQL has HMAC (pgcrypto's hmac()) but
-- no Ed25519, so this uses the hmac-sha256 scheme: make the key with
--
--     fencectl keygen DIR --scheme hmac-sha256
--
-- give DIR/signing.key to fenced (--token-signing-key) and the line of
-- DIR/verify.keys to this database, as the role that loaded these files:
--
--     SELECT fence.add_verify_key('h1a2b3c4d hmac-sha256 <43 characters>');
--
-- TRUST MODEL: an HMAC key both verifies and signs.  Whoever can read
-- fence.hmac_keys (the loading role, superusers, anyone with the database's
-- files or backups) or DIR/verify.keys can mint valid tokens for every fence
-- this database guards.  Applications cannot read the table: only the
-- SECURITY DEFINER functions below can.  Use a key per resource, so one
-- leaked database key does not let anyone mint tokens for another
-- resource.  See docs/security.md, "Signed tokens".
--
-- Use, in the transaction that writes (as with fence.admit):
--
--     BEGIN;
--     SELECT fence.admit_signed('orders', $1);  -- $1: the signed token text
--     UPDATE orders SET status = 'shipped' WHERE id = 42;
--     COMMIT;
--
-- fence.admit_signed checks the token and then calls fence.admit with its
-- number, so the mark, the row lock and the stale rule (FN001) are exactly
-- fence.admit's.  A refused token raises
--   FN004  "BADTOKEN <reason>": not a signed token, malformed, signed with a
--          key id this database does not list, or a signature that does not
--          match (fence, token, key id): forged, altered or for another lock
-- and nothing changes.  The signed token is "<token>.<key id>.<signature>"
-- (docs/security.md): the signature is HMAC-SHA256 over
--   'fenced-token-v1' 0x00 | u8 len(key id) | key id |
--   u16 big-endian len(name) | name (UTF-8 bytes) | u64 big-endian token
-- in unpadded base64url.
--
-- Privileges: to REQUIRE signed tokens, grant applications only
-- fence.admit_signed (and fence.high), NOT fence.admit: a role that may call
-- fence.admit can still raise a mark with any number.
--     GRANT USAGE ON SCHEMA fence TO app;
--     GRANT EXECUTE ON FUNCTION fence.admit_signed(text, text), fence.high(text) TO app;
-- fence.add_verify_key and fence.remove_verify_key stay with the owner.
--
-- Rotation: add the new key's line, switch fenced to the new signing.key,
-- and remove the old key id once no token signed with it is in use:
--     SELECT fence.remove_verify_key('h1a2b3c4d');

BEGIN;

SET LOCAL client_min_messages = warning;

-- pgcrypto is a trusted extension (PostgreSQL 13+): a database owner may
-- create it.  It is used through its schema, found at load time below.
CREATE EXTENSION IF NOT EXISTS pgcrypto;

-- The HMAC keys this database accepts tokens from (several = rotation).
CREATE TABLE IF NOT EXISTS fence.hmac_keys (
    key_id     text        NOT NULL,
    key        bytea       NOT NULL,
    added_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT hmac_keys_pkey PRIMARY KEY (key_id),
    CONSTRAINT hmac_keys_id CHECK (key_id ~ '^h[A-Za-z0-9_-]{0,31}$'),
    CONSTRAINT hmac_keys_length CHECK (octet_length(key) = 32)
);
COMMENT ON TABLE fence.hmac_keys IS
    'Secret HMAC-SHA256 keys for signed fencing tokens; readable only through fence.admit_signed.';
REVOKE ALL ON TABLE fence.hmac_keys FROM PUBLIC;

-- The functions are created with dynamic SQL so that every pgcrypto call is
-- qualified with the schema pgcrypto lives in (the search_path of a
-- SECURITY DEFINER function must not include a schema others can write).
DO $load$
DECLARE
    ext text;
BEGIN
    SELECT n.nspname INTO ext FROM pg_extension e
        JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pgcrypto';

    -- fence.add_verify_key(line): add one verify.keys line "KEYID
    -- hmac-sha256 BASE64URL" (as `fencectl keygen --scheme hmac-sha256`
    -- writes it).  Returns the key id.  Raises FN005 on a bad line or a key
    -- id already present.
    EXECUTE $f$
    CREATE OR REPLACE FUNCTION fence.add_verify_key(line text)
    RETURNS text
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $fn$
    DECLARE
        m text[];
    BEGIN
        m := regexp_match(line, '^\s*(h[A-Za-z0-9_-]{0,31})\s+hmac-sha256\s+([A-Za-z0-9_-]{42}[AEIMQUYcgkosw048])\s*$');
        IF m IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'FN005',
                MESSAGE = 'bad verify key line: want "hKEYID hmac-sha256 <43 base64url characters>"';
        END IF;
        IF EXISTS (SELECT 1 FROM fence.hmac_keys k WHERE k.key_id = m[1]) THEN
            RAISE EXCEPTION USING ERRCODE = 'FN005',
                MESSAGE = format('key id %s is already listed', m[1]);
        END IF;
        INSERT INTO fence.hmac_keys (key_id, key)
            VALUES (m[1], decode(translate(m[2], '-_', '+/') || '=', 'base64'));
        RETURN m[1];
    END
    $fn$;
    $f$;

    -- fence.remove_verify_key(key_id): stop accepting tokens of a key.
    -- Returns true if it was listed.
    EXECUTE $f$
    CREATE OR REPLACE FUNCTION fence.remove_verify_key(key_id text)
    RETURNS boolean
    LANGUAGE sql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $fn$
        WITH d AS (DELETE FROM fence.hmac_keys k WHERE k.key_id = $1 RETURNING 1)
        SELECT count(*) > 0 FROM d;
    $fn$;
    $f$;

    -- fence.admit_signed(name, signed_token): verify, then fence.admit.
    -- The comparison is of HMACs of the two MACs under a fresh random key,
    -- so its timing says nothing about how many bytes matched.
    EXECUTE format($f$
    CREATE OR REPLACE FUNCTION fence.admit_signed(name text, signed_token text)
    RETURNS bigint
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $fn$
    DECLARE
        m text[];
        tok numeric;
        kid text;
        k bytea;
        nb bytea;
        msg bytea;
        given bytea;
        blind bytea;
    BEGIN
        IF admit_signed.name IS NULL OR octet_length(admit_signed.name) < 1
           OR octet_length(convert_to(admit_signed.name, 'UTF8')) > 256 THEN
            RAISE EXCEPTION USING ERRCODE = 'FN002',
                MESSAGE = 'invalid fence name: must be 1..256 bytes';
        END IF;
        IF signed_token ~ '^[1-9][0-9]{0,19}$' THEN
            RAISE EXCEPTION USING ERRCODE = 'FN004',
                MESSAGE = format('BADTOKEN token %%s is not signed; this database accepts only signed tokens (LOCK ... SIGNED)', signed_token);
        END IF;
        m := regexp_match(signed_token, '^([1-9][0-9]{0,19})\.(h[A-Za-z0-9_-]{0,31})\.([A-Za-z0-9_-]{42}[AEIMQUYcgkosw048])$');
        IF m IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'FN004',
                MESSAGE = 'BADTOKEN malformed signed token: want TOKEN.hKEYID.<43 base64url characters> (hmac-sha256)';
        END IF;
        tok := m[1]::numeric;
        IF tok > 18446744073709551615 THEN
            RAISE EXCEPTION USING ERRCODE = 'FN004',
                MESSAGE = 'BADTOKEN malformed signed token: the token is above 2^64-1';
        END IF;
        kid := m[2];
        SELECT hk.key INTO k FROM fence.hmac_keys hk WHERE hk.key_id = kid;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'FN004',
                MESSAGE = format('BADTOKEN token %%s is signed with key %%s, which this database does not list', m[1], kid);
        END IF;
        nb := convert_to(admit_signed.name, 'UTF8');
        -- u64 big-endian: a token >= 2^63 has the bytes of tok - 2^64 as a bigint.
        msg := convert_to('fenced-token-v1', 'UTF8') || '\x00'::bytea
            || set_byte('\x00'::bytea, 0, octet_length(kid)) || convert_to(kid, 'UTF8')
            || int2send(octet_length(nb)::smallint) || nb
            || int8send(CASE WHEN tok > 9223372036854775807
                             THEN (tok - 18446744073709551616)::bigint
                             ELSE tok::bigint END);
        given := decode(translate(m[3], '-_', '+/') || '=', 'base64');
        blind := %1$I.gen_random_bytes(32);
        IF %1$I.hmac(%1$I.hmac(msg, k, 'sha256'), blind, 'sha256')
           <> %1$I.hmac(given, blind, 'sha256') THEN
            RAISE EXCEPTION USING ERRCODE = 'FN004',
                MESSAGE = format('BADTOKEN the signature of token %%s (key %%s) does not match fence %%L and that number: forged, altered or issued for another lock',
                                 m[1], kid, admit_signed.name);
        END IF;
        IF tok > 9223372036854775807 THEN
            RAISE EXCEPTION USING ERRCODE = 'FN003',
                MESSAGE = format('fencing token %%s for fence %%L is above 9223372036854775807, the largest a bigint mark holds', m[1], admit_signed.name);
        END IF;
        RETURN fence.admit(admit_signed.name, tok::bigint);
    END
    $fn$;
    $f$, ext);
END
$load$;

COMMENT ON FUNCTION fence.admit_signed(text, text) IS
    'Verify a signed fencing token (HMAC-SHA256, fence.hmac_keys) and admit it (FN004 if refused, FN001 if stale).';
COMMENT ON FUNCTION fence.add_verify_key(text) IS
    'Add a verify.keys line of an hmac-sha256 key (owner only).';
COMMENT ON FUNCTION fence.remove_verify_key(text) IS
    'Stop accepting tokens signed with a key id (owner only).';

REVOKE ALL ON FUNCTION fence.admit_signed(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.add_verify_key(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION fence.remove_verify_key(text) FROM PUBLIC;

COMMIT;
