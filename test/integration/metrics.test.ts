// Goal: `GET /metrics` on the admin listener is a valid Prometheus exposition (parsed strictly,
// and by promtool when it is installed) that carries every process's figures: requests by API,
// operation and status class with latency histograms, bytes in and out, upload admissions,
// engine commit groups and fdatasyncs, segments, compaction and GC, deduplication, the outbox,
// per-tenant usage, and process figures of the engine, the gateway and the admin process. With
// `log.access` on, every request is one JSON line that carries no token or query.
// Method: serve with the access log on; a tenant writes the same object twice (the second time
// deduplicated) and reads it; the test scrapes until the gateway's figures (sent every 5 s)
// show those requests.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Service } from '../helpers/service.js';
import { parseExposition, valueOf, type Family } from '../helpers/prometheus-text.js';

const OBJECT_BYTES = 300 * 1024;

function promtool(): string | undefined {
  try {
    execFileSync('promtool', ['--version'], { stdio: 'ignore' });
    return 'promtool';
  } catch {
    return undefined;
  }
}

t.test('metrics of every process, and the access log', async (t) => {
  const service = await Service.start({
    args: ['--log.access', 'true', '--gateway-threads', '1', '--workers', '1'],
  });
  t.teardown(() => service.close());
  const client = await service.tenant('metrics');
  t.equal((await client.request('POST', '/buckets', { json: { name: 'scraped' } })).status, 201);
  const body = Buffer.alloc(OBJECT_BYTES, 'metrics ');
  t.equal((await client.put('scraped', 'one', body)).status, 200);
  t.equal((await client.put('scraped', 'two', body)).status, 200, 'the same bytes again');
  t.equal((await client.get('scraped', 'one')).status, 200);
  t.equal((await client.get('scraped', 'missing')).status, 404);
  // A query that must never reach a log line.
  await fetch(`${service.publicUrl}/healthz?X-Amz-Signature=sig-never-logged`);

  let families: Map<string, Family> | undefined;
  let text = '';
  // The gateway sends its figures every 5 s: scrape until they show the GET's bytes.
  for (;;) {
    const answer = await fetch(`http://127.0.0.1:${service.adminPort}/metrics`);
    t.equal(answer.status, 200);
    text = await answer.text();
    families = parseExposition(text);
    const sent = valueOf(families, 'lightwell_http_sent_bytes_total', { process: 'gateway' });
    if ((sent ?? 0) >= OBJECT_BYTES) {
      t.match(answer.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
      break;
    }
    await new Promise((resolveLater) => setTimeout(resolveLater, 500));
  }
  const value = (name: string, labels: Record<string, string> = {}): number =>
    valueOf(families, name, labels) ?? -1;
  const put = { api: 'native', operation: 'putObject', status: '2xx', process: 'gateway' };
  t.equal(value('lightwell_http_requests_total', put), 2, 'two PUTs');
  t.equal(value('lightwell_http_requests_total', { operation: 'getObject', status: '4xx' }), 1);
  t.equal(
    value('lightwell_http_request_duration_seconds_count', { operation: 'putObject' }),
    2,
    'PUT latency histogram',
  );
  t.ok(value('lightwell_http_received_bytes_total', { api: 'native' }) >= 2 * OBJECT_BYTES);
  t.equal(value('lightwell_upload_admissions_total', { process: 'gateway' }), 2);
  t.ok(value('lightwell_upload_admission_waits_total') >= 0, 'admission waits');
  t.ok(value('lightwell_engine_commit_group_size_count', { process: 'engine' }) >= 3);
  t.ok(value('lightwell_engine_commit_seconds_count') >= 3);
  t.ok(value('lightwell_engine_fdatasync_seconds_count') >= 1, 'fdatasyncs');
  t.ok(value('lightwell_engine_manifest_chunks_total', { kind: 'written' }) >= 1);
  t.ok(value('lightwell_engine_manifest_chunks_total', { kind: 'deduplicated' }) >= 1, 'dedup');
  t.ok(value('lightwell_segments') >= 1, 'segments');
  t.equal(value('lightwell_gc_bytes_reclaimed_total'), 0, 'GC figures');
  t.equal(value('lightwell_compaction_segments_compacted_total'), 0, 'compaction figures');
  t.equal(value('lightwell_outbox_pending_events'), 0, 'outbox depth');
  t.equal(value('lightwell_outbox_delivery_failures_total'), 0);
  t.equal(value('lightwell_tenant_logical_bytes', { tenant: 'metrics' }), 2 * OBJECT_BYTES);
  t.equal(value('lightwell_tenant_objects', { tenant: 'metrics' }), 2);
  for (const process of ['engine', 'gateway', 'admin'])
    t.ok(value('lightwell_process_resident_memory_bytes', { process }) > 0, `${process} RSS`);
  t.equal(value('lightwell_http_requests_total', { api: 'admin', operation: 'createTenant' }), 1);

  const tool = promtool();
  if (tool === undefined) t.comment('promtool check metrics skipped: promtool is not installed');
  else {
    const file = join(mkdtempSync(join(tmpdir(), 'lw-metrics-')), 'metrics.txt');
    writeFileSync(file, text);
    const lint = execFileSync('sh', ['-c', `${tool} check metrics < ${file}; echo rc=$?`], {
      encoding: 'utf8',
    });
    t.match(lint, /rc=0/, `promtool: ${lint}`);
  }

  const access = service.output
    .split('\n')
    .filter((line) => line.includes('"component":"access"'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  t.match(
    access.find((line) => line['op'] === 'putObject'),
    {
      api: 'native',
      method: 'PUT',
      path: '/api/v1/buckets/scraped/objects/one',
      status: 200,
      bytesIn: OBJECT_BYTES,
      tenant: 'metrics',
      msg: 'request',
    },
    'one JSON line per request',
  );
  t.notMatch(service.output, /sig-never-logged/, 'no query in the log');
  t.notMatch(service.output, new RegExp(client.token), 'no token in the log');
  t.notMatch(service.output, /Bearer|lwtk_|lwadm_/, 'no credentials in the log');
});

t.test('the Grafana dashboard queries only metrics the service exposes', async (t) => {
  const file = new URL('../../../docs/grafana-dashboard.json', import.meta.url);
  const dashboard = JSON.parse(readFileSync(file, 'utf8')) as {
    panels: Array<{ title: string; targets: Array<{ expr: string }> }>;
  };
  const documented = readFileSync(new URL('../../../docs/operations.md', import.meta.url), 'utf8');
  t.ok(dashboard.panels.length >= 10, `${dashboard.panels.length} panels`);
  for (const panel of dashboard.panels)
    for (const target of panel.targets)
      for (const [name] of target.expr.matchAll(/lightwell_[a-z_]+/g)) {
        const base = name.replace(/_(bucket|sum|count)$/, '');
        t.ok(
          documented.includes(base) || base.startsWith('lightwell_process_'),
          `${panel.title}: ${name} is a documented metric`,
        );
      }
});
