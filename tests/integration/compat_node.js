// ioredis 5 and node-redis 4 against fenced and fence-store (issue 13):
// connect options (name, db / database), MULTI/EXEC refusal with no
// effect, and commands after it.  Run by test_compat_node.sh:
//   node compat_node.js <node_modules dir> <fenced port> <fence-store port>
'use strict';
const path = require('path');
const [modDir, fencedPort, storePort] = process.argv.slice(2);
const IORedis = require(path.join(modDir, 'ioredis'));
const nodeRedis = require(path.join(modDir, 'redis'));

let passed = 0, failed = 0;
function check(cond, what, detail) {
  if (cond) { passed++; console.log('ok - ' + what); }
  else {
    failed++;
    if (detail !== undefined) console.log('#   ' + String(detail).split('\n').join('\n#   '));
    console.log('not ok - ' + what);
  }
}
// Resolves to the error a promise rejects with, or null if it resolves.
async function rejection(p) {
  try { await p; return null; } catch (e) { return e; }
}
function field(info, key) {
  const m = new RegExp('^' + key + ':(.*)$', 'm').exec(info.replace(/\r/g, ''));
  return m ? m[1] : undefined;
}
function timeout(ms) { return new Promise(r => setTimeout(() => r('timeout'), ms)); }

async function ioredisTests(name, port, txCmds, checkNothingRan) {
  const r = new IORedis({ host: '127.0.0.1', port, connectionName: 'io-' + name, db: 0,
                          maxRetriesPerRequest: 1, retryStrategy: () => null });
  let errors = [];
  r.on('error', e => errors.push(e));
  check(await r.ping() === 'PONG', `ioredis/${name}: connects with connectionName and db 0`);
  check(await r.client('GETNAME') === 'io-' + name, `ioredis/${name}: CLIENT GETNAME`);
  const before = await r.info();
  const tx = r.multi();
  for (const c of txCmds) tx.call(...c);
  const err = await rejection(tx.exec());
  check(err !== null, `ioredis/${name}: multi().exec() rejects`, err && err.message);
  await checkNothingRan(cmd => r.call(...cmd), before, `ioredis/${name}`);
  check(await r.ping() === 'PONG', `ioredis/${name}: the connection works after the refused block`);
  check(errors.length === 0, `ioredis/${name}: no error events`, errors.map(e => e.message).join('; '));
  r.disconnect();

  const bad = new IORedis({ host: '127.0.0.1', port, db: 1, maxRetriesPerRequest: 0,
                            retryStrategy: () => null, lazyConnect: true });
  const seen = [];
  bad.on('error', e => seen.push(e.message));
  await Promise.race([rejection(bad.connect()), timeout(3000)]);
  await Promise.race([rejection(bad.ping()), timeout(2000)]);
  check(seen.some(m => m.includes('DB index is out of range')),
        `ioredis/${name}: db 1 reports a clear error`, seen.join('; '));
  bad.disconnect();
}

async function nodeRedisTests(name, port, txCmds, checkNothingRan) {
  const c = nodeRedis.createClient({ socket: { host: '127.0.0.1', port, reconnectStrategy: false },
                                     name: 'nr-' + name, database: 0 });
  const errors = [];
  c.on('error', e => errors.push(e));
  await c.connect();
  check(await c.ping() === 'PONG', `node-redis/${name}: connects with name and database 0`);
  check(await c.clientGetName() === 'nr-' + name, `node-redis/${name}: CLIENT GETNAME`);
  const list = await c.sendCommand(['CLIENT', 'LIST']);
  check(/lib-name=node-redis/.test(list), `node-redis/${name}: CLIENT SETINFO LIB-NAME was accepted`, list);
  const before = await c.sendCommand(['INFO']);
  let m = c.multi();
  for (const cmd of txCmds) m = m.addCommand(cmd.map(String));
  const err = await rejection(m.exec());
  check(err !== null, `node-redis/${name}: multi().exec() rejects`, err && err.message);
  await checkNothingRan(cmd => c.sendCommand(cmd.map(String)), before, `node-redis/${name}`);
  check(await c.ping() === 'PONG', `node-redis/${name}: the connection works after the refused block`);
  check(errors.length === 0, `node-redis/${name}: no error events`, errors.map(e => e.message).join('; '));
  await c.quit();

  const bad = nodeRedis.createClient({ socket: { host: '127.0.0.1', port, reconnectStrategy: false },
                                       database: 1 });
  bad.on('error', () => {});
  const e = await Promise.race([rejection(bad.connect()), timeout(3000)]);
  check(e && e !== 'timeout' && /DB index is out of range/.test(e.message),
        `node-redis/${name}: database 1 fails to connect clearly`, e && e.message);
  try { await bad.disconnect(); } catch (_) { /* already closed */ }
}

async function fencedNothingRan(call, before, who) {
  const info = await call(['INFO']);
  check(field(info, 'leases') === field(before, 'leases'), `${who}: fenced: the block granted no lease`,
        field(before, 'leases') + ' -> ' + field(info, 'leases'));
  check(field(info, 'last_token') === field(before, 'last_token'),
        `${who}: fenced: the block granted no token`);
}

async function storeNothingRan(call, before, who) {
  check(await call(['FGET', 'node-k']) === null, `${who}: fence-store: FSET in the block wrote nothing`);
  check(Number(await call(['FENCE.HIGH', 'node-g'])) === 0,
        `${who}: fence-store: FENCE.ADMIT in the block did not run`);
}

(async () => {
  const fencedTx = [['LEASE.GRANT', 10000], ['ACQUIRE', 'node-lock', 10000]];
  const storeTx = [['FSET', 'node-f', 3, 'node-k', 'v'], ['FENCE.ADMIT', 'node-g', 4]];
  for (const [fn, lib] of [[ioredisTests, 'ioredis'], [nodeRedisTests, 'node-redis']]) {
    for (const [name, port, tx, chk] of [['fenced', +fencedPort, fencedTx, fencedNothingRan],
                                         ['fence-store', +storePort, storeTx, storeNothingRan]]) {
      try { await fn(name, port, tx, chk); }
      catch (e) { check(false, `${lib}/${name}: crashed`, e && e.stack); }
    }
  }
  console.log(`# ${passed} passed, ${failed} failed in compat_node.js`);
  process.exit(failed ? 1 : 0);
})();
