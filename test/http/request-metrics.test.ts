// Goal: a listener's request figures (RequestMetrics) are kept in plain numbers and read into
// the registry at collection: the exposition has the same series as prom-client's own counter
// and histogram would give (cumulative buckets, +Inf, sum and count per API and operation,
// requests per status class, bytes per API), and snapshots of two registries merge by summing.
// Method: fake exchanges of known latency, status and sizes observed by two RequestMetrics; the
// text of one registry and of the merged snapshots read line by line.
import t from 'tap';
import { Registry } from 'prom-client';
import { RequestMetrics } from '../../src/http/metrics.js';
import { exposition } from '../../src/util/metrics.js';
import type { Exchange } from '../../src/http/exchange.js';

function exchange(action: string, status: number, ms: number, bytesIn = 0, bytesOut = 0): Exchange {
  return {
    audit: { action },
    aborted: status === 0,
    status,
    startedAt: performance.now() - ms,
    bytesIn,
    bytesOut,
  } as unknown as Exchange;
}

/** The value of the line `name{labels}` of an exposition (labels in the order written). */
function line(text: string, series: string): number | undefined {
  const found = text.split('\n').find((entry) => entry.startsWith(`${series} `));
  return found === undefined ? undefined : Number(found.slice(series.length + 1));
}

t.test('figures of one registry', async (t) => {
  const registry = new Registry();
  const metrics = new RequestMetrics(registry);
  metrics.observe('native', exchange('getObject', 200, 3, 0, 4096));
  metrics.observe('native', exchange('getObject', 404, 30, 0, 100));
  metrics.observe('native', exchange('putObject', 200, 0.5, 4096, 50));
  metrics.observe('s3', exchange('getObject', 0, 2000));
  const text = await registry.metrics();
  const get = 'api="native",operation="getObject"';
  t.equal(line(text, `lightwell_http_request_duration_seconds_bucket{le="0.001",${get}}`), 0);
  t.equal(line(text, `lightwell_http_request_duration_seconds_bucket{le="0.005",${get}}`), 1);
  t.equal(line(text, `lightwell_http_request_duration_seconds_bucket{le="0.025",${get}}`), 1);
  t.equal(line(text, `lightwell_http_request_duration_seconds_bucket{le="0.05",${get}}`), 2);
  t.equal(line(text, `lightwell_http_request_duration_seconds_bucket{le="+Inf",${get}}`), 2);
  t.equal(line(text, `lightwell_http_request_duration_seconds_count{${get}}`), 2);
  const sum = line(text, `lightwell_http_request_duration_seconds_sum{${get}}`) ?? 0;
  t.ok(sum >= 0.033 && sum < 1, `the sum of both latencies (${sum})`);
  const s3 = 'api="s3",operation="getObject"';
  t.equal(line(text, `lightwell_http_request_duration_seconds_bucket{le="1",${s3}}`), 0);
  t.equal(line(text, `lightwell_http_request_duration_seconds_bucket{le="2.5",${s3}}`), 1);
  t.equal(
    line(text, 'lightwell_http_requests_total{api="native",operation="getObject",status="2xx"}'),
    1,
  );
  t.equal(
    line(text, 'lightwell_http_requests_total{api="native",operation="getObject",status="4xx"}'),
    1,
  );
  t.equal(
    line(text, 'lightwell_http_requests_total{api="s3",operation="getObject",status="aborted"}'),
    1,
  );
  t.equal(line(text, 'lightwell_http_received_bytes_total{api="native"}'), 4096);
  t.equal(line(text, 'lightwell_http_sent_bytes_total{api="native"}'), 4246);
  t.equal(
    line(text, 'lightwell_http_sent_bytes_total{api="s3"}'),
    undefined,
    'no bytes, no series',
  );
  t.match(text, /# TYPE lightwell_http_request_duration_seconds histogram/);

  metrics.observe('native', exchange('getObject', 200, 3));
  const again = await registry.metrics();
  t.equal(
    line(again, `lightwell_http_request_duration_seconds_count{${get}}`),
    3,
    'a later collection counts every request since the start',
  );
});

t.test('snapshots of two registries merge by summing', async (t) => {
  const registries = [new Registry(), new Registry()];
  for (const registry of registries) {
    registry.setDefaultLabels({ process: 'gateway' });
    const metrics = new RequestMetrics(registry);
    metrics.observe('native', exchange('putObject', 200, 7, 10, 20));
  }
  const snapshots = await Promise.all(registries.map((registry) => registry.getMetricsAsJSON()));
  const { text } = await exposition(snapshots);
  const put = 'api="native",operation="putObject",process="gateway"';
  t.equal(line(text, `lightwell_http_request_duration_seconds_bucket{le="0.01",${put}}`), 2);
  t.equal(line(text, `lightwell_http_request_duration_seconds_count{${put}}`), 2);
  t.equal(
    line(
      text,
      'lightwell_http_requests_total{api="native",operation="putObject",status="2xx",process="gateway"}',
    ),
    2,
  );
  t.equal(line(text, 'lightwell_http_received_bytes_total{api="native",process="gateway"}'), 20);
});
