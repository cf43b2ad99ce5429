// Goal: the data directory's first files are durable by name, not only by content: after the
// FORMAT marker and the master key are written (temporary name, fsync, rename) the directory
// holding each is fsynced, and so are the root and its parent once the tree is created. A crash
// right after the engine's first start must not leave a directory without its marker or key.
// Method: a real temporary directory through the node:fs seam, with `syncDirectory` recorded
// (and every other call passed through), in the order the calls happen.
import t from 'tap';
import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import { dataDirPaths, prepareDataDir, loadMasterKey } from '../../src/engine/data-dir.js';
import { nodeIo, type Io } from '../../src/util/io.js';
import { tempDir } from './segment-testing.js';

function recordingIo(events: string[]): Io {
  return {
    ...nodeIo,
    rename: async (from, to) => {
      await nodeIo.rename(from, to);
      events.push(`rename ${to}`);
    },
    syncDirectory: async (path) => {
      await nodeIo.syncDirectory(path);
      events.push(`fsync ${path}`);
    },
  };
}

t.test('the FORMAT marker and the tree are fsynced into their directories', async (t) => {
  const paths = dataDirPaths(`${tempDir(t, 'lw-datadir-')}/data`);
  const events: string[] = [];
  const { created } = await prepareDataDir(paths, recordingIo(events));
  t.ok(created);
  t.ok(existsSync(paths.marker));
  const renamed = events.indexOf(`rename ${paths.marker}`);
  t.ok(renamed >= 0, 'the marker is renamed into place');
  t.ok(
    events.indexOf(`fsync ${paths.root}`) > renamed,
    'the root is fsynced after the marker is renamed into it',
  );
  t.ok(events.includes(`fsync ${dirname(paths.root)}`), "the root's parent is fsynced");
  // A second start creates nothing, and syncs nothing.
  events.length = 0;
  t.same((await prepareDataDir(paths, recordingIo(events))).created, false);
  t.same(events, []);
});

t.test('a new master key is fsynced into keys/', async (t) => {
  const paths = dataDirPaths(tempDir(t, 'lw-datadir-'));
  await prepareDataDir(paths);
  const events: string[] = [];
  const key = await loadMasterKey(paths, { dataUnderKey: false }, recordingIo(events));
  t.equal(key.length, 32);
  const renamed = events.indexOf(`rename ${paths.masterKey}`);
  t.ok(renamed >= 0);
  t.ok(events.indexOf(`fsync ${paths.keys}`) > renamed, 'keys/ is fsynced after the rename');
});
