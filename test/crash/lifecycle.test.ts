// Goal: a crash in the middle of a lifecycle pass loses nothing and does nothing twice: every
// expiry that committed committed whole (its version gone, its index entry gone, its audit row
// written, usage exact), every other object keeps its entry, and the next pass finishes the work.
// Method: a child process fills an index with 3,000 objects due under a one-day rule (half in a
// versioned bucket), a second child runs the executor ten days on and is killed with SIGKILL
// after a few hundred commits; the test reopens the index, checks it, and runs a pass itself.
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { IndexStore, CommandBatch } from '../../src/engine/index/store.js';
import {
  DB,
  tenantKey,
  type AuditEvent,
  type ObjectVersionRecord,
  type UsageRecord,
} from '../../src/engine/index/schema.js';
import { dueKey, type LifecycleSubjectRecord } from '../../src/engine/index/lifecycle-schema.js';
import { LifecycleExecutor } from '../../src/engine/lifecycle.js';
import { componentLogger } from '../../src/util/log.js';
import { tempDir } from '../engine/segment-testing.js';
import { CRASH_LATER, CRASH_OBJECTS, CRASH_TENANT, crashContext } from './lifecycle-child.js';

const CHILD = fileURLToPath(new URL('./lifecycle-child.js', import.meta.url));
/** How long a child may take on a loaded machine. */
const CHILD_LIMIT_MS = 120_000;

function runChild(directory: string, phase: string, killAfter?: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD, '--child', directory, phase], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let output = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new TypeError(`the ${phase} child did not finish within ${CHILD_LIMIT_MS} ms`));
    }, CHILD_LIMIT_MS);
    child.stdout.on('data', (data: Buffer) => {
      output += data.toString();
      const done = [...output.matchAll(/done (\d+)/g)].at(-1)?.[1];
      if (killAfter !== undefined && done !== undefined && Number(done) >= killAfter)
        child.kill('SIGKILL');
    });
    child.on('exit', () => {
      clearTimeout(timer);
      resolve(output);
    });
  });
}

function lifecycleRows(store: IndexStore): AuditEvent[] {
  return [...store.range<AuditEvent>(DB.audit, {})]
    .map((entry) => entry.value)
    .filter((row) => row.actor === 'lifecycle');
}

/** Every subject has its one due row and the other way round. */
function checkPairs(t: Test, store: IndexStore): number {
  let pairs = 0;
  for (const { key, value } of store.range<LifecycleSubjectRecord>(DB.lifecycleSubjects, {})) {
    if (!store.has(DB.lifecycleDue, dueKey(value.due, Buffer.from(key))))
      t.fail('a subject without its due row');
    pairs += 1;
  }
  t.equal([...store.range(DB.lifecycleDue, {})].length, pairs, 'as many due rows as subjects');
  return pairs;
}

t.test('a pass killed midway resumes without loss or repetition', async (t) => {
  const directory = tempDir(t, 'lw-lifecycle-crash-');
  await runChild(directory, 'fill');
  const output = await runChild(directory, 'expire', 256);
  t.notMatch(output, /finished/, 'the child was killed before it finished');
  const store = IndexStore.open({ path: directory, readOnly: false });
  t.teardown(() => store.close());
  const expired = lifecycleRows(store).length;
  t.ok(expired >= 256, `at least the acknowledged commits survived (${expired})`);
  t.ok(expired < CRASH_OBJECTS, 'and the pass had not finished');
  const pending = checkPairs(t, store);
  t.equal(expired + pending, CRASH_OBJECTS, 'each object was expired once or still waits');
  const usage = store.get<UsageRecord>(DB.usage, tenantKey(CRASH_TENANT));
  const current = [...store.range(DB.objects, {})].length;
  t.equal(usage?.objects, current, 'usage counts exactly the objects left');

  const batch = new CommandBatch(store);
  const executor = new LifecycleExecutor({
    context: crashContext(store, CRASH_LATER),
    submit: (apply) => batch.submit(apply),
    log: componentLogger('test.lifecycle-crash'),
    intervalMs: 60_000,
  });
  await executor.runPass();
  t.equal(lifecycleRows(store).length, CRASH_OBJECTS, 'one audit row per object, none twice');
  t.equal([...store.range(DB.objects, {})].length, 0, 'every object expired');
  t.equal(checkPairs(t, store), 0, 'the index is empty');
  const markers = [...store.range<ObjectVersionRecord>(DB.versions, {})].filter(
    (entry) => entry.value.deleteMarker,
  );
  t.equal(markers.length, CRASH_OBJECTS / 2, 'the versioned half has one delete marker each');
});
