// node-redis (latest, DEFAULT options: RESP3, so it connects with HELLO 3)
// and ioredis 5 (RESP2) against fenced and fence-store (issue 20): connect,
// LEASE.GRANT / LOCK / UNLOCK and a busy LOCK's null, FSET / FGET and a
// missing key's null, INFO's # Server section.  Run by test_resp3_node.sh:
// With users (--acl-file, user alice): node-redis' username/password go in
// HELLO 3 AUTH; a wrong password fails to connect with WRONGPASS.
//   node resp3_node.js <node_modules dir> <fenced port> <fence-store port>
//                      <fenced --acl-file port> <fence-store --acl-file port>
'use strict';
const path = require('path');
const [modDir, fencedPort, storePort, aclFencedPort, aclStorePort] = process.argv.slice(2);
const IORedis = require(path.join(modDir, 'ioredis'));
const nodeRedis = require(path.join(modDir, 'redis'));
const nrVersion = require(path.join(modDir, 'redis', 'package.json')).version;

let passed = 0, failed = 0;
function check(cond, what, detail) {
  if (cond) { passed++; console.log('ok - ' + what); }
  else {
    failed++;
    if (detail !== undefined) console.log('#   ' + String(detail).split('\n').join('\n#   '));
    console.log('not ok - ' + what);
  }
}
function field(info, key) {
  const m = new RegExp('^' + key + ':(.*)$', 'm').exec(String(info).replace(/\r/g, ''));
  return m ? m[1] : undefined;
}
function timeout(ms) { return new Promise(r => setTimeout(() => r(new Error('timeout')), ms)); }
function infoChecks(who, info, daemon) {
  check(/^# Server$/m.test(String(info).replace(/\r/g, '')), `${who}: INFO has a # Server section`, info);
  check(field(info, 'redis_version') === '7.0.0', `${who}: INFO redis_version:7.0.0`);
  check(/^\d+\.\d+\.\d+/.test(field(info, daemon.replace('-', '_') + '_version') || ''),
        `${who}: INFO ${daemon.replace('-', '_')}_version`);
}

// node-redis with its defaults: nothing but the address.
async function nodeRedisTests(name, port) {
  const who = `node-redis ${nrVersion} (defaults: RESP3)/${name}`;
  const c = nodeRedis.createClient({ socket: { host: '127.0.0.1', port, reconnectStrategy: false } });
  const errors = [];
  c.on('error', e => errors.push(e));
  const e = await Promise.race([c.connect().then(() => null, err => err), timeout(5000)]);
  check(e === null, `${who}: createClient() connects`, e && e.message);
  if (e !== null) return;
  check(await c.ping() === 'PONG', `${who}: PING`);
  const me = String(await c.sendCommand(['CLIENT', 'INFO']));
  check(/ resp=3 /.test(me), `${who}: the connection is RESP3 (CLIENT INFO resp=3)`, me);
  const hello = await c.sendCommand(['HELLO']);
  check(hello && !Array.isArray(hello) && hello.proto === 3 && hello.server === name,
        `${who}: HELLO answers a map (decoded as an object) with proto 3`, JSON.stringify(hello));
  if (name === 'fenced') {
    const lease = await c.sendCommand(['LEASE.GRANT', '10000']);
    check(typeof lease === 'number' && lease > 0, `${who}: LEASE.GRANT`, lease);
    const lease2 = await c.sendCommand(['LEASE.GRANT', '10000']);
    const tok = await c.sendCommand(['LOCK', 'nr3-lock', String(lease)]);
    check(typeof tok === 'number' && tok > 0, `${who}: LOCK gives a token`, tok);
    const busy = await c.sendCommand(['LOCK', 'nr3-lock', String(lease2)]);
    check(busy === null, `${who}: LOCK of a held lock by another lease is null`, busy);
    const li = await c.sendCommand(['LOCK.INFO', 'nr3-lock']);
    check(Array.isArray(li) && li[0] === tok && li[1] === lease, `${who}: LOCK.INFO`, JSON.stringify(li));
    check(await c.sendCommand(['UNLOCK', 'nr3-lock', String(tok)]) === 1, `${who}: UNLOCK`);
    check(await c.sendCommand(['LOCK.INFO', 'nr3-lock']) === null, `${who}: LOCK.INFO of a free lock is null`);
    const ll = await c.sendCommand(['LEASE.LIST']);
    check(Array.isArray(ll) && ll.length === 2 && Array.isArray(ll[1]), `${who}: LEASE.LIST`, JSON.stringify(ll));
  } else {
    check(await c.sendCommand(['FSET', 'nr3-f', '5', 'nr3-k', 'v1']) === 'OK', `${who}: FSET`);
    check(String(await c.sendCommand(['FGET', 'nr3-k'])) === 'v1', `${who}: FGET`);
    check(await c.sendCommand(['FGET', 'nr3-missing']) === null, `${who}: FGET of a missing key is null`);
    const stale = await c.sendCommand(['FSET', 'nr3-f', '4', 'nr3-k', 'v0']).then(() => null, err => err);
    check(stale && /^STALE/.test(stale.message), `${who}: a stale token's error is the same`, stale && stale.message);
  }
  infoChecks(who, await c.info(), name);
  infoChecks(who + ' INFO server', await c.info('server'), name);
  check(errors.length === 0, `${who}: no error events`, errors.map(x => x.message).join('; '));
  await c.quit();

  const named = nodeRedis.createClient({ socket: { host: '127.0.0.1', port, reconnectStrategy: false },
                                         name: 'nr3-' + name });
  named.on('error', () => {});
  await named.connect();
  check(await named.clientGetName() === 'nr3-' + name, `${who}: name option (HELLO 3 SETNAME)`);
  await named.quit();
}

async function ioredisTests(name, port) {
  const who = `ioredis/${name}`;
  const r = new IORedis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1, retryStrategy: () => null });
  const errors = [];
  r.on('error', e => errors.push(e));
  check(await r.ping() === 'PONG', `${who}: connects`);
  if (name === 'fenced') {
    const lease = await r.call('LEASE.GRANT', 10000);
    const tok = await r.call('LOCK', 'io3-lock', lease);
    check(tok > 0, `${who}: LEASE.GRANT and LOCK`, tok);
    check(await r.call('UNLOCK', 'io3-lock', tok) === 1, `${who}: UNLOCK`);
    check(await r.call('LOCK.INFO', 'io3-lock') === null, `${who}: LOCK.INFO of a free lock is nil`);
  } else {
    check(await r.call('FSET', 'io3-f', 5, 'io3-k', 'v') === 'OK', `${who}: FSET`);
    check(await r.call('FGET', 'io3-k') === 'v', `${who}: FGET`);
    check(await r.call('FGET', 'io3-none') === null, `${who}: FGET missing is nil`);
  }
  infoChecks(who, await r.info(), name);
  infoChecks(who + ' INFO server', await r.info('server'), name);
  const me = await r.client('INFO');
  check(/ resp=2 /.test(me), `${who}: the connection stays RESP2`, me);
  check(errors.length === 0, `${who}: no error events`, errors.map(x => x.message).join('; '));
  r.disconnect();
}

async function aclTests(name, port) {
  const who = `node-redis ${nrVersion} (RESP3, HELLO 3 AUTH)/${name}`;
  const c = nodeRedis.createClient({ socket: { host: '127.0.0.1', port, reconnectStrategy: false },
                                     username: 'alice', password: 'al1ce-pw-x', name: 'nr3a' });
  c.on('error', () => {});
  const e = await Promise.race([c.connect().then(() => null, err => err), timeout(5000)]);
  check(e === null, `${who}: connects with username and password`, e && e.message);
  if (e !== null) return;
  check(String(await c.sendCommand(['ACL', 'WHOAMI'])) === 'alice', `${who}: ACL WHOAMI is alice`);
  check(await c.clientGetName() === 'nr3a', `${who}: named in the same HELLO`);
  const me = String(await c.sendCommand(['CLIENT', 'INFO']));
  check(/ resp=3 /.test(me) && / user=alice /.test(me), `${who}: CLIENT INFO resp=3 user=alice`, me);
  if (name === 'fenced') {
    const lease = await c.sendCommand(['LEASE.GRANT', '10000']);
    check(typeof lease === 'number' && lease > 0, `${who}: LEASE.GRANT as alice`, lease);
  } else {
    check(await c.sendCommand(['FSET', 'a-f', '1', 'a-k', 'v']) === 'OK', `${who}: FSET as alice`);
  }
  await c.quit();
  const bad = nodeRedis.createClient({ socket: { host: '127.0.0.1', port, reconnectStrategy: false },
                                       username: 'alice', password: 'wrong' });
  bad.on('error', () => {});
  const be = await Promise.race([bad.connect().then(() => null, err => err), timeout(5000)]);
  check(be && /WRONGPASS/.test(be.message), `${who}: a wrong password fails with WRONGPASS`,
        be && be.message);
  try { await bad.disconnect(); } catch (_) { /* already closed */ }
}

(async () => {
  for (const [fn, lib] of [[nodeRedisTests, 'node-redis'], [ioredisTests, 'ioredis']]) {
    for (const [name, port] of [['fenced', +fencedPort], ['fence-store', +storePort]]) {
      try { await fn(name, port); }
      catch (e) { check(false, `${lib}/${name}: crashed`, e && e.stack); }
    }
  }
  if (aclFencedPort) {
    for (const [name, port] of [['fenced', +aclFencedPort], ['fence-store', +aclStorePort]]) {
      try { await aclTests(name, port); }
      catch (e) { check(false, `node-redis acl/${name}: crashed`, e && e.stack); }
    }
  }
  console.log(`# ${passed} passed, ${failed} failed in resp3_node.js`);
  process.exit(failed ? 1 : 0);
})();
