// A real webhook receiver for integration tests: an HTTP server on loopback that records every
// delivery, checks its X-Service-Signature against the config's signing secret, and can be
// told to fail (answer an error status, drop the connection, or never answer) and to recover.

import { createServer, type Server, type IncomingMessage, type ServerResponse } from 'node:http';
import { createHmac, timingSafeEqual } from 'node:crypto';

export interface Delivery {
  readonly path: string;
  readonly body: string;
  readonly event: Record<string, unknown>;
  readonly signature: string;
  readonly receivedAt: number;
}

export type FailureMode = { kind: 'status'; status: number } | { kind: 'drop' } | { kind: 'hang' };

/** A request left unanswered ('hang'), and when the sender closed its connection. */
export interface HangingRequest {
  readonly path: string;
  closedAt?: number;
}

export class WebhookReceiver {
  /** Every request, accepted or failed, in arrival order. */
  readonly attempts: Delivery[] = [];
  /** Requests answered 2xx, in arrival order. */
  readonly delivered: Delivery[] = [];
  /** Requests never answered, in arrival order. */
  readonly hanging: HangingRequest[] = [];
  /** Failure mode by request path; '*' applies to every path without its own. */
  private readonly failures = new Map<string, FailureMode>();
  private waiters: Array<() => void> = [];

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(): Promise<WebhookReceiver> {
    // Set once listening; a request that arrives before then is left unanswered.
    const receiver: { current?: WebhookReceiver } = {};
    const server = createServer((request, response) => receiver.current?.handle(request, response));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const address = server.address();
    receiver.current = new WebhookReceiver(
      server,
      typeof address === 'object' && address ? address.port : 0,
    );
    return receiver.current;
  }

  url(path = '/hook'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** From now on requests to `path` (default: every path) fail this way, until `recover()`. */
  fail(mode: FailureMode = { kind: 'status', status: 503 }, path = '*'): void {
    this.failures.set(path, mode);
  }

  recover(path?: string): void {
    if (path === undefined) this.failures.clear();
    else this.failures.delete(path);
  }

  private handle(request: IncomingMessage, response: ServerResponse): void {
    const parts: Buffer[] = [];
    request.on('data', (chunk: Buffer) => parts.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(parts).toString('utf8');
      let event: Record<string, unknown> = {};
      try {
        event = JSON.parse(body) as Record<string, unknown>;
      } catch {
        // recorded with an empty event; the test will see it
      }
      const delivery: Delivery = {
        path: request.url ?? '',
        body,
        event,
        signature: String(request.headers['x-service-signature'] ?? ''),
        receivedAt: Date.now(),
      };
      this.attempts.push(delivery);
      const failure = this.failures.get(delivery.path) ?? this.failures.get('*');
      if (failure?.kind === 'drop') {
        request.socket.destroy();
      } else if (failure?.kind === 'hang') {
        const hanging: HangingRequest = { path: delivery.path };
        this.hanging.push(hanging);
        request.socket.once('close', () => {
          hanging.closedAt = Date.now();
        });
      } else if (failure?.kind === 'status') {
        response.writeHead(failure.status).end('failing on purpose');
      } else {
        this.delivered.push(delivery);
        response.writeHead(204).end();
      }
      for (const wake of this.waiters.splice(0)) wake();
    });
  }

  /** Resolves when `predicate` holds (checked after every request), or rejects after `timeoutMs`. */
  async waitFor(predicate: () => boolean, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      if (Date.now() > deadline)
        throw new RangeError(
          `webhook receiver: condition not met in ${timeoutMs} ms (${this.delivered.length} delivered, ${this.attempts.length} attempts)`,
        );
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 200);
      });
    }
  }

  /** Events delivered to `path`, in arrival order, deduplicated by id (at-least-once). */
  eventsAt(path: string): Array<Record<string, unknown>> {
    const seen = new Set<unknown>();
    return this.delivered
      .filter((delivery) => delivery.path === path)
      .map((delivery) => delivery.event)
      .filter((event) => {
        if (seen.has(event['id'])) return false;
        seen.add(event['id']);
        return true;
      });
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** Checks `t=<unix>,v1=<hex>` against HMAC-SHA256(secret, t + "." + body). */
export function signatureValid(secret: string, delivery: Delivery): boolean {
  const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(delivery.signature);
  if (!match) return false;
  const expected = createHmac('sha256', secret).update(`${match[1]!}.${delivery.body}`).digest();
  return timingSafeEqual(expected, Buffer.from(match[2] ?? '', 'hex'));
}
