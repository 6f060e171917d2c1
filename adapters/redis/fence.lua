#!lua name=fence
--[[
fence: fenced writes for Redis 7 (a Redis Functions library).

Load it once (REPLACE makes loading again harmless; marks are data and are
kept):

    redis-cli -x FUNCTION LOAD REPLACE < adapters/redis/fence.lua

The rule: a request carrying token T for fence key F is admitted iff
T >= high(F); admitting raises high(F) to T.  Equal tokens are admitted.
Each function runs atomically (Redis runs one function at a time), so the
check and the protected write cannot be separated by another client.

    FCALL fence_set   2 <key> <fencekey> <token> <value>  -> OK
    FCALL fence_del   2 <key> <fencekey> <token>          -> 0 or 1
    FCALL fence_incr  2 <key> <fencekey> <token>          -> the new value
    FCALL fence_admit 1 <fencekey> <token>                -> OK
    FCALL fence_high  1 <fencekey>                        -> "<highest>"
                                      (also FCALL_RO; "0" if never admitted)

A stale token gets the error reply

    -STALE <token> <highest> fencing token <token> is older than the highest admitted token <highest> for fence key <fencekey>

and nothing is written.

A key belongs to one fence: the first fence_set or fence_incr of <key>
binds it to <fencekey>, and every later fence_set, fence_del or fence_incr
of <key> through another fence key is refused with

    -WRONGFENCE key '<key>' belongs to fence key '<owner>'; ...

whatever the token, nothing written.  Without this a holder whose token is
stale for fence F could write F's keys through a fence G it never used (any
token is admitted for a fence whose mark is 0).  The binding is stored in
its own key, OWNER(<key>) = <key>:fence-owner when <key> has a hash tag,
else {<key>}:fence-owner, so that it is in <key>'s hash slot; it outlives
fence_del.  A fence key is bound to itself when its mark is first written,
so no fence can overwrite another's mark with fence_set, and a key that
belongs to a fence is refused as a fence key (fence_admit could otherwise
raise it as a mark).  Keys ending in
":fence-owner" are reserved and refused as <key>.  Keys written before this
rule existed are bound by their next fenced write.  Bad input gets an "-ERR fence: ..." reply and
nothing is written.

Tokens are unsigned 64-bit integers written in decimal: digits only, no
sign, 1..20 digits, at most 18446744073709551615.  Leading zeros are
allowed and ignored.  Lua numbers in Redis 7 are doubles, exact only up to
2^53, so tokens are never converted to numbers: they are compared as
decimal strings (shorter is smaller; equal lengths compare bytewise).  The
mark is stored in <fencekey> as a plain string holding the decimal token,
without leading zeros, so that GET shows it too.  fence_high returns it as
a bulk string for the same reason (an integer reply would be a double on
its way out of Lua).

See adapters/redis/README.md for the Redis Cluster hash-tag rule and the
durability caveat (use appendonly yes + appendfsync always).
]]

-- The largest token, 2^64-1, in decimal (20 digits).
local TOKEN_MAX = '18446744073709551615'

-- 2^53: Lua numbers (doubles) represent every integer of smaller magnitude
-- exactly.
local EXACT_LIMIT = 9007199254740992

-- Parse a token argument.  Returns its canonical decimal form (no leading
-- zeros), or nil and a sentence saying what is wrong with it.  what names the
-- argument in that sentence.
local function token_parse(s, what)
    if type(s) ~= 'string' then
        return nil, what .. ' is missing'
    end
    if #s == 0 then
        return nil, what .. ' is empty'
    end
    if #s > 20 then
        return nil, what .. ' is too long (at most 20 digits, up to ' .. TOKEN_MAX .. ')'
    end
    if string.find(s, '[^0-9]') then
        return nil, what .. ' must be decimal digits only (no sign, no spaces, no exponent)'
    end
    if #s == 20 and s > TOKEN_MAX then
        return nil, what .. ' is above ' .. TOKEN_MAX .. ' (2^64-1)'
    end
    local canon = string.gsub(s, '^0+', '')
    if canon == '' then
        canon = '0'
    end
    return canon
end

-- Compare two canonical tokens exactly: -1 if a < b, 0 if equal, 1 if a > b.
-- Canonical tokens have no leading zeros, so the shorter one is smaller, and
-- two of the same length compare like their bytes.
local function token_cmp(a, b)
    if #a ~= #b then
        return (#a < #b) and -1 or 1
    end
    if a == b then
        return 0
    end
    return (a < b) and -1 or 1
end

-- Read the mark stored in fencekey.  Returns the canonical token ("0" if the
-- key does not exist), or nil and an error sentence if the key holds
-- something that is not a token: a damaged mark is refused, never treated
-- as zero.  A key of another type makes GET raise WRONGTYPE, which ends the
-- call before anything was written.
local function mark_read(fencekey)
    local raw = redis.call('GET', fencekey)
    if not raw then
        return '0'
    end
    local high, why = token_parse(raw, 'the stored mark')
    if not high then
        return nil, 'fence key ' .. fencekey .. ' does not hold a fencing token (' .. why ..
            '); refusing to treat it as 0'
    end
    return high
end

-- The binding records end with this; such keys are refused as data keys.
local OWNER_SUFFIX = ':fence-owner'

-- True if key has a Redis Cluster hash tag: a '{' followed later by a '}'
-- with at least one byte between them (the first such pair decides).
local function has_hash_tag(key)
    local open = string.find(key, '{', 1, true)
    if not open then
        return false
    end
    local close = string.find(key, '}', open + 1, true)
    return close ~= nil and close > open + 1
end

-- The key holding the name of the fence key that key belongs to, in key's
-- hash slot: a tagged key keeps its tag; an untagged one becomes the tag.
local function owner_key(key)
    if has_hash_tag(key) then
        return key .. OWNER_SUFFIX
    end
    return '{' .. key .. '}' .. OWNER_SUFFIX
end

-- The error reply for bad input: the stable code ERR, then a sentence.
local function err(fname, sentence)
    return redis.error_reply('ERR fence: ' .. fname .. ': ' .. sentence)
end

-- Validate the key count and the argument count of a call, and the token in
-- args[1].  Returns the canonical token and the current mark of keys[nkeys]
-- (the fence key), or nil and an error reply.  usage is shown on a count
-- mismatch.  Writes nothing.
local function admission(fname, keys, args, nkeys, nargs, usage)
    if #keys ~= nkeys or #args ~= nargs then
        return nil, err(fname, 'wrong number of keys or arguments; usage: FCALL ' .. fname .. ' ' .. usage)
    end
    local fencekey = keys[nkeys]
    if nkeys == 2 and keys[1] == fencekey then
        return nil, err(fname, 'the key and the fence key must differ (the write would overwrite the mark)')
    end
    if nkeys == 2 and #keys[1] >= #OWNER_SUFFIX and
            string.sub(keys[1], -#OWNER_SUFFIX) == OWNER_SUFFIX then
        return nil, err(fname, 'keys ending in ' .. OWNER_SUFFIX .. ' are reserved (they record which fence a key belongs to)')
    end
    local token, why = token_parse(args[1], 'token')
    if not token then
        return nil, err(fname, why)
    end
    local high, mwhy = mark_read(fencekey)
    if not high then
        return nil, err(fname, mwhy)
    end
    if token_cmp(token, high) < 0 then
        return nil, redis.error_reply('STALE ' .. token .. ' ' .. high .. ' fencing token ' .. token ..
            ' is older than the highest admitted token ' .. high .. ' for fence key ' .. fencekey)
    end
    local fowner = redis.call('GET', owner_key(fencekey))
    if fowner and fowner ~= fencekey then
        return nil, redis.error_reply('WRONGFENCE fence key \'' .. fencekey .. '\' is a key of fence key \'' ..
            fowner .. '\', not a fence; nothing was written')
    end
    if nkeys == 2 then
        local owner = redis.call('GET', owner_key(keys[1]))
        if owner and owner ~= fencekey then
            return nil, redis.error_reply('WRONGFENCE key \'' .. keys[1] .. '\' belongs to fence key \'' ..
                owner .. '\'; a key is written only through the fence that first wrote it; nothing was written')
        end
    end
    return token, high
end

-- Bind key to fencekey if it is not bound yet (after the data write, which
-- is the step that can fail: Redis does not undo a function's writes).
local function owner_bind(key, fencekey)
    redis.call('SET', owner_key(key), fencekey, 'NX')
end

-- Raise the mark of fencekey to token (already admitted).  An equal token
-- leaves the key alone, so a holder's repeated writes cost no extra write.
local function mark_raise(fencekey, token, high)
    if token_cmp(token, high) > 0 then
        redis.call('SET', fencekey, token)
        if high == '0' then
            owner_bind(fencekey, fencekey) -- a mark belongs to its own fence
        end
    end
end

-- FCALL fence_set 2 <key> <fencekey> <token> <value>: SET key value if the
-- token is admitted.  The data write comes first: it cannot fail once the
-- checks passed, and if it did, nothing would have changed.
local function fence_set(keys, args)
    local token, high = admission('fence_set', keys, args, 2, 2, '2 <key> <fencekey> <token> <value>')
    if not token then
        return high
    end
    local reply = redis.call('SET', keys[1], args[2])
    mark_raise(keys[2], token, high)
    owner_bind(keys[1], keys[2])
    return reply
end

-- FCALL fence_del 2 <key> <fencekey> <token>: DEL key if the token is
-- admitted; returns the number of keys removed (0 or 1).  The key's
-- binding stays (a deleted key is not recreated through another fence); a
-- key never written is not bound by a delete.
local function fence_del(keys, args)
    local token, high = admission('fence_del', keys, args, 2, 1, '2 <key> <fencekey> <token>')
    if not token then
        return high
    end
    local n = redis.call('DEL', keys[1])
    mark_raise(keys[2], token, high)
    return n
end

-- FCALL fence_incr 2 <key> <fencekey> <token>: INCR key if the token is
-- admitted; returns the new value.  INCR comes first so that a key that
-- does not hold an integer fails the call before the mark moves.  Values
-- whose magnitude is 2^53 or more cannot pass through a Lua number exactly,
-- so they are returned as the exact decimal bulk string read back from the
-- key; smaller values are integer replies.
local function fence_incr(keys, args)
    local token, high = admission('fence_incr', keys, args, 2, 1, '2 <key> <fencekey> <token>')
    if not token then
        return high
    end
    local v = redis.call('INCR', keys[1])
    mark_raise(keys[2], token, high)
    owner_bind(keys[1], keys[2])
    if v > -EXACT_LIMIT and v < EXACT_LIMIT then
        return v
    end
    return redis.call('GET', keys[1])
end

-- FCALL fence_admit 1 <fencekey> <token>: raise the mark without a write.
-- A holder that will read, compute and then write (read-modify-write) calls
-- this before reading, so that no older holder can write in between.
local function fence_admit(keys, args)
    local token, high = admission('fence_admit', keys, args, 1, 1, '1 <fencekey> <token>')
    if not token then
        return high
    end
    mark_raise(keys[1], token, high)
    return redis.status_reply('OK')
end

-- FCALL[_RO] fence_high 1 <fencekey>: the mark as a decimal bulk string,
-- "0" if the fence was never admitted.
local function fence_high(keys, args)
    if #keys ~= 1 or #args ~= 0 then
        return err('fence_high', 'wrong number of keys or arguments; usage: FCALL fence_high 1 <fencekey>')
    end
    local high, why = mark_read(keys[1])
    if not high then
        return err('fence_high', why)
    end
    return high
end

redis.register_function{function_name = 'fence_set', callback = fence_set}
redis.register_function{function_name = 'fence_del', callback = fence_del}
redis.register_function{function_name = 'fence_incr', callback = fence_incr}
redis.register_function{function_name = 'fence_admit', callback = fence_admit}
redis.register_function{function_name = 'fence_high', callback = fence_high, flags = {'no-writes'}}
