// Goal: the peer comparison's command line and report: flags parse to the targets and sizes they
// name (bad ones are exit 2), and peers.md puts Lightwell's throughput and CPU as ratios to each
// peer's, CPU per request for ops/s rows, and a skipped peer or a failed measurement where a
// reader sees them.
// Method: parsePeersOptions and renderPeersMarkdown on hand-made input; runPeers only with flags
// it refuses. No target is started here: the peers come from npm and apt, which CI cannot rely
// on, and Lightwell's side of the loads is `npm run bench`'s own (run.test.ts).

import t from 'tap';
import { machineInfo } from '../../bench/machine.js';
import { type PeerRun, type PeersReport, renderPeersMarkdown } from '../../bench/peer-report.js';
import { PEERS } from '../../bench/peer-targets.js';
import { parsePeersOptions, runPeers } from '../../bench/peers.js';
import type { ScenarioReport } from '../../bench/report.js';

t.test('flags: targets in run order, profiles, ports; bad flags are exit 2', async (t) => {
  const print = (): void => undefined;
  const all = parsePeersOptions([], print);
  t.same(all?.only, ['lightwell', 's3rver', 'nginx']);
  t.equal(all?.profile, 'full');
  t.equal(all?.portBase, null);
  t.equal(all?.install, false);
  t.equal(all?.s3Sdk, 'tuned', 'the S3 scenarios run the bench-tuned SDK unless asked');
  const some = parsePeersOptions(
    ['--quick', '--only', 'nginx,lightwell', '--port-base', '9500', '--s3-sdk', 'default'],
    print,
  );
  t.equal(some?.s3Sdk, 'default');
  t.same(some?.only, ['lightwell', 'nginx']);
  t.equal(some?.profile, 'quick');
  t.equal(some?.portBase, 9500);
  let usage = '';
  t.equal(
    parsePeersOptions(['--help'], (text) => (usage = text)),
    null,
  );
  t.match(usage, /--install/);
  for (const bad of [
    ['--only', 'minio'],
    ['--port-base', '65534'],
    ['--port-base', 'x'],
    ['--s3-sdk', 'fast'],
    ['--nope'],
  ]) {
    let err = '';
    const code = await runPeers(bad, {
      out: () => undefined,
      err: { write: (s: string) => (err += s) },
    });
    t.equal(code, 2, bad.join(' '));
    t.match(err, /Usage: npm run bench:peers/);
  }
});

function measurement(
  name: string,
  unit: 'MB/s' | 'ops/s',
  value: number,
  cpuSeconds: number,
): ScenarioReport {
  return {
    name,
    title: name,
    status: 'ok',
    objects: 1000,
    objectBytes: 4096,
    concurrency: 64,
    operations: 1000,
    bytes: 1e9,
    seconds: 1,
    throughput: { value, unit },
    opsPerSecond: 1000,
    megabytesPerSecond: 1000,
    latencyMsP50: 1.5,
    latencyMsP99: 9.5,
    latencyMsMax: 12,
    serverCpuSeconds: cpuSeconds,
    serverCpuSecondsPerGB: cpuSeconds,
    clientCpuSecondsPerGB: 0.5,
    client: 'native',
    serverPeakRssBytes: 64 * 1024 * 1024,
    serverPeakPssBytes: null,
    ratios: [],
    failures: [],
    notes: [],
  };
}

function target(index: number, rest: Partial<PeerRun>): PeerRun {
  const peer = PEERS[index];
  if (peer === undefined) throw new RangeError(`no peer ${index}`);
  const { name, title, facts } = peer;
  return { name, title, facts, version: '1', status: 'ok', measurements: [], ...rest };
}

t.test('peers.md: facts, ratios to each peer, skipped and failed rows', (t) => {
  const failed = { ...measurement('get', 'MB/s', 0, 0), status: 'failed' as const };
  const report: PeersReport = {
    formatVersion: 1,
    generatedAt: '2026-11-22T00:00:00.000Z',
    machine: machineInfo('.'),
    settings: { profile: 'test' },
    sizes: {},
    measurements: [
      { name: 'put', title: '4 KiB PUT' },
      { name: 'get', title: '64 MiB GET' },
    ],
    targets: [
      target(0, {
        measurements: [measurement('put', 'ops/s', 3000, 1.2), measurement('get', 'MB/s', 800, 2)],
      }),
      target(1, {
        status: 'failed',
        measurements: [
          measurement('put', 'ops/s', 1500, 2.4),
          { ...failed, failures: ['body CRC32 1, expected 2'] },
        ],
      }),
      target(2, { version: null, status: 'skipped', reason: 'nginx not found' }),
    ],
    ok: false,
  };
  const md = renderPeersMarkdown(report);
  const row = (cells: string[]): string => `| ${cells.join(' | ')} |`;
  t.match(
    md,
    row(['lightwell', 'ok', '3000 ops/s', '1.5', '9.5', '1200 µs/op', '64 MiB', '1.00', '1.00']),
  );
  t.match(
    md,
    row(['s3rver', 'ok', '1500 ops/s', '1.5', '9.5', '2400 µs/op', '64 MiB', '2.00', '0.50']),
  );
  t.match(md, /\| lightwell \| ok \| 800 MB\/s \| .* \| 2\.00 s\/GB \|/);
  t.match(md, /\| s3rver \| \*\*FAILED\*\* \| body CRC32 1, expected 2 \|/);
  t.match(md, /\| nginx \| skipped \| nginx not found \|/);
  t.match(md, /## Failures\n\n- s3rver get: body CRC32 1, expected 2/);
  t.match(md, /fdatasync of the data and the LMDB commit before the 2xx/);
  t.match(
    md,
    /\| nginx WebDAV PUT \(the plain file server\) \| – \| none: written to the page cache/,
  );
  t.end();
});

t.test('peers.md: a measurement a target cannot run (no S3 API) is a skipped row', (t) => {
  const s3 = { name: 's3-put-4k-c64', title: 'S3 (AWS SDK) 4 KiB PUT' };
  const skipped = {
    ...measurement(s3.name, 'ops/s', 0, 0),
    status: 'skipped' as const,
    reason: 'no S3 API',
  };
  const report: PeersReport = {
    formatVersion: 1,
    generatedAt: '2026-12-07T00:00:00.000Z',
    machine: machineInfo('.'),
    settings: { profile: 'test' },
    sizes: {},
    measurements: [s3],
    targets: [
      target(0, { measurements: [measurement(s3.name, 'ops/s', 300, 0.6)] }),
      target(1, { measurements: [measurement(s3.name, 'ops/s', 150, 0.9)] }),
      target(2, { measurements: [skipped] }),
    ],
    ok: true,
  };
  const md = renderPeersMarkdown(report);
  t.match(md, /\| s3rver \| ok \| 150 ops\/s \| .* \| 2\.00 \| 0\.67 \|/);
  t.match(md, /\| nginx \| skipped \| no S3 API \|/);
  t.notMatch(md, /FAILED/);
  t.end();
});
