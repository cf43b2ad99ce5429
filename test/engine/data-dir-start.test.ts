// Goal: what a start says about a data directory: a new one only inside an existing parent and
// reported as created; a gateway or admin process on a path with no store and no engine refused
// at once; a wait for an engine that ran out names the directory and whether an engine runs.
// Method: the data-dir functions on temporary directories.
import t from 'tap';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  checkDataDirParent,
  dataDirPaths,
  newStoreNotice,
  noEngineError,
  prepareDataDir,
  requireStore,
} from '../../src/engine/data-dir.js';
import { EngineUnavailable, NotFound } from '../../src/util/errors.js';

const root = mkdtempSync(join(tmpdir(), 'lw-datadir-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));

t.test('a new data directory only inside an existing parent, and said so', async (t) => {
  const typo = dataDirPaths(join(root, 'typo', 'data'));
  t.throws(() => checkDataDirParent(typo), {
    code: 'data_dir_unusable',
    message: `${join(root, 'typo')} does not exist, so no data directory is created at ${typo.root}: check --data-dir, or create the parent directory first`,
  });
  await t.rejects(prepareDataDir(typo), { code: 'data_dir_unusable' });
  const fresh = dataDirPaths(join(root, 'fresh'));
  t.same(await prepareDataDir(fresh), { created: true }, 'a new store');
  t.same(await prepareDataDir(fresh), { created: false }, 'then an existing one');
  t.match(newStoreNotice(fresh), `created a new, empty data directory at ${fresh.root}`);
});

t.test('a gateway or admin process needs a store or an engine there', async (t) => {
  const empty = dataDirPaths(join(root, 'empty'));
  mkdirSync(empty.root);
  t.throws(() => requireStore(empty, 'gateway'), {
    code: 'engine_unavailable',
    message: new RegExp(
      `^no Lightwell data directory at ${empty.root} and no engine running on it: the gateway`,
    ),
  });
  const store = dataDirPaths(join(root, 'store'));
  await prepareDataDir(store);
  t.doesNotThrow(() => requireStore(store, 'gateway'), 'a data directory: the engine may come');
  const locked = dataDirPaths(join(root, 'locked'));
  mkdirSync(locked.root);
  writeFileSync(locked.lock, `${process.pid}\n`);
  t.doesNotThrow(() => requireStore(locked, 'admin process'), 'an engine is creating it');
});

t.test('a wait that ran out names the directory and its engine', async (t) => {
  const store = dataDirPaths(join(root, 'waited'));
  await prepareDataDir(store);
  const cause = EngineUnavailable('engine socket not reachable');
  t.match(noEngineError(store, 30_000, cause), {
    code: 'engine_unavailable',
    message:
      `no engine answered within 30 s on data directory ${store.root}: no engine is running ` +
      `on it (start lightwell-engine --data-dir ${store.root}, or run everything with ` +
      'lightwell serve)',
  });
  writeFileSync(store.lock, `${process.pid}\n`);
  t.match(noEngineError(store, 30_000, cause), {
    message: new RegExp(`its engine \\(process ${process.pid}\\) does not answer`),
  });
  const other = NotFound('something else');
  t.equal(noEngineError(store, 30_000, other), other, 'another failure passes as it is');
});
