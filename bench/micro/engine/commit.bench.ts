// Micro-benchmark of the engine's commit path for small objects: `putObject` commands, each with
// the audit row a gateway sends, applied through a CommandBatch in groups as the engine receives
// them, on a fresh index in a temporary directory.
//
// Usage: node dist/bench/micro/engine/commit.bench.js [--commands 20000] [--group 16] [--each]
//        [--packed]
// --each hands each group to the batch in one `submitEach` (as the engine's `putObjects` does)
// instead of one `submit` a command; --packed also encodes each group's arguments with
// put-group-codec.ts and decodes them before they are applied (the gateway's and the engine's
// side of the wire, on this one thread).
// Small defaults so CI runs it as a smoke test. Prints the time the commands' callbacks took on
// the engine thread per command (the part of the engine's CPU that grows with the work), the
// process's CPU per command (with LMDB's commit thread and the syncs), and commands per second.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CommandBatch, IndexStore } from '../../../src/engine/index/store.js';
import type { EngineContext } from '../../../src/engine/ops/context.js';
import * as control from '../../../src/engine/ops/control.js';
import * as objects from '../../../src/engine/ops/objects.js';
import * as segments from '../../../src/engine/ops/segments.js';
import { writeAudit, type AuditInput } from '../../../src/engine/ops/audit.js';
import { loadSettings } from '../../../src/util/config.js';
import { decodePutGroup, encodePutGroup } from '../../../src/engine/put-group-codec.js';

const { values } = parseArgs({
  options: {
    commands: { type: 'string', default: '20000' },
    group: { type: 'string', default: '16' },
    each: { type: 'boolean', default: false },
    packed: { type: 'boolean', default: false },
  },
});
const commands = Math.max(1, Number.parseInt(values.commands, 10) || 1);
const group = Math.max(1, Number.parseInt(values.group, 10) || 1);

const dir = mkdtempSync(join(tmpdir(), 'lw-commit-bench-'));
const store = IndexStore.open({ path: join(dir, 'index'), readOnly: false });
const context: EngineContext = {
  store,
  masterKey: randomBytes(32),
  settings: loadSettings({ flags: { data_dir: dir } }),
  now: () => Date.now(),
};

const { segmentId } = await store.transact(() =>
  segments.allocSegment(context, { ownerPid: process.pid }),
);
await store.transact(() => {
  control.createTenant(context, { id: 'acme' });
  objects.createBucket(context, { tenantId: 'acme', name: 'logs' });
});

let offset = 64;
/** The arguments of one 4 KiB PUT as the gateway sends them. */
function putArgs(index: number): objects.PutObjectArgs & { audit: AuditInput } {
  offset += 4200;
  return {
    tenantId: 'acme',
    bucket: 'logs',
    key: `ingest/2026/11/21/host-${index % 97}/event-${index}.json`,
    size: 4096,
    etag: `"${randomBytes(16).toString('hex')}"`,
    contentType: 'application/octet-stream',
    metadata: {},
    checksums: { CRC32C: randomBytes(4).toString('base64') },
    compressed: false,
    chunks: [
      {
        id: randomBytes(32),
        plainLength: 4096,
        location: { segmentId, offset, length: 4176, payloadChecksum: 12345 },
      },
    ],
    audit: {
      requestId: `req-${index}`,
      actor: 'LWAKIAEXAMPLE0000001',
      action: 'object.put',
      resource: `logs/ingest/2026/11/21/host-${index % 97}/event-${index}.json`,
      outcome: 'allowed',
      status: 200,
      remoteAddr: '127.0.0.1',
      time: Date.now(),
      tenantId: 'acme',
    },
  };
}

const batch = new CommandBatch(store);
let applyMs = 0;
const cpuBefore = process.cpuUsage();
const started = performance.now();
const applyOf = (args: ReturnType<typeof putArgs>) => (): unknown => {
  const from = performance.now();
  const version = objects.putObject(context, args);
  writeAudit(context, args.audit);
  applyMs += performance.now() - from;
  return version;
};
for (let done = 0; done < commands; done += group) {
  let items: Array<ReturnType<typeof putArgs>> = [];
  for (let index = done; index < Math.min(commands, done + group); index += 1)
    items.push(putArgs(index));
  if (values.packed) items = decodePutGroup(encodePutGroup(items)) as unknown as typeof items;
  if (values.each) await batch.submitEach(items.map(applyOf));
  else await Promise.all(items.map((args) => batch.submit(applyOf(args))));
}
const wallMs = performance.now() - started;
const cpu = process.cpuUsage(cpuBefore);
await store.close();
rmSync(dir, { recursive: true, force: true });

const perCommandUs = (ms: number): string => ((ms * 1000) / commands).toFixed(1);
console.log(
  `commands: ${commands}, group: ${group}, each: ${String(values.each)}, packed: ${String(values.packed)}`,
);
console.log(`callbacks on the engine thread: ${perCommandUs(applyMs)} µs per command`);
console.log(`process CPU: ${perCommandUs((cpu.user + cpu.system) / 1000)} µs per command`);
console.log(`throughput: ${Math.round((commands / wallMs) * 1000)} commands/s`);
