// Live charts from the service's own Prometheus metrics (`GET /metrics` on the admin listener,
// the same figures a Prometheus server scrapes): the page reads them every few seconds while it
// is open and charts the rates between reads — requests a second by status class, and bytes a
// second received and sent. The history is this page's only (a reload starts over); a
// Prometheus server keeps the long one.

import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { TimeChart } from './chart.js';
import { ErrorBox, Section } from './ui.js';

const SCRAPE_MS = 5000;
/** Points kept: a quarter of an hour at one read every five seconds. */
const POINTS_MAX = 180;

/** The sums the charts need from one exposition. */
interface Sample {
  /** Unix seconds. */
  at: number;
  requests: Record<'2xx' | '4xx' | '5xx', number>;
  received: number;
  sent: number;
}

/**
 * Sums the counters of one Prometheus text exposition: `name{labels} value` lines, comments
 * skipped. Only what the charts use is read.
 */
export function sampleOf(text: string, at: number): Sample {
  const sample: Sample = { at, requests: { '2xx': 0, '4xx': 0, '5xx': 0 }, received: 0, sent: 0 };
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-z_:]+)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const [, name, labels = '', raw = ''] = match;
    const value = Number(raw);
    if (!Number.isFinite(value)) continue;
    if (name === 'lightwell_http_requests_total') {
      const status = /status="(\d)/.exec(labels)?.[1];
      if (status === '2' || status === '3') sample.requests['2xx'] += value;
      else if (status === '4') sample.requests['4xx'] += value;
      else if (status === '5') sample.requests['5xx'] += value;
    } else if (name === 'lightwell_http_received_bytes_total') sample.received += value;
    else if (name === 'lightwell_http_sent_bytes_total') sample.sent += value;
  }
  return sample;
}

/** Per-second rates between consecutive samples (a counter that fell, after a restart: 0). */
function rates(samples: readonly Sample[], pick: (sample: Sample) => number): number[] {
  const values: number[] = [];
  for (let index = 1; index < samples.length; index += 1) {
    const previous = samples[index - 1] as Sample;
    const current = samples[index] as Sample;
    const seconds = Math.max(0.001, current.at - previous.at);
    values.push(Math.max(0, pick(current) - pick(previous)) / seconds);
  }
  return values;
}

export function LiveMetrics(): JSX.Element {
  const [samples, setSamples] = useState<Sample[]>([]);
  const [error, setError] = useState<unknown>(undefined);
  useEffect(() => {
    let stopped = false;
    const scrape = async (): Promise<void> => {
      try {
        const response = await fetch('/metrics', { cache: 'no-store', credentials: 'omit' });
        if (!response.ok) throw new Error(`GET /metrics answered HTTP ${String(response.status)}`);
        const sample = sampleOf(await response.text(), Date.now() / 1000);
        if (!stopped) setSamples((old) => [...old, sample].slice(-POINTS_MAX));
        setError(undefined);
      } catch (failure) {
        if (!stopped) setError(failure);
      }
    };
    void scrape();
    const timer = setInterval(() => void scrape(), SCRAPE_MS);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, []);
  const times = samples.slice(1).map((sample) => sample.at);
  return (
    <Section title="Live, from /metrics (since this page opened)">
      <ErrorBox error={error} />
      {samples.length < 3 ? (
        <p class="muted" aria-busy="true">
          Reading the metrics; the charts start once two rates are known (a few seconds).
        </p>
      ) : (
        <>
          <TimeChart
            title="Requests a second by status, from /metrics"
            times={times}
            series={[
              {
                label: '2xx/3xx',
                color: '#2563eb',
                values: rates(samples, (s) => s.requests['2xx']),
              },
              { label: '4xx', color: '#d97706', values: rates(samples, (s) => s.requests['4xx']) },
              { label: '5xx', color: '#dc2626', values: rates(samples, (s) => s.requests['5xx']) },
            ]}
            height={180}
          />
          <TimeChart
            title="KiB a second received and sent, from /metrics"
            times={times}
            series={[
              {
                label: 'KiB/s received',
                color: '#059669',
                values: rates(samples, (s) => s.received / 1024),
              },
              {
                label: 'KiB/s sent',
                color: '#7c3aed',
                values: rates(samples, (s) => s.sent / 1024),
              },
            ]}
            height={180}
          />
        </>
      )}
    </Section>
  );
}
