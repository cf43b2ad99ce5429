// Goal: the ingest transport refuses bad input in its own form, as docs/ingest-protocol.md says:
// a malformed frame closes with 4400 and commits nothing of the object it belonged to while the
// objects acknowledged before stay; a frame over the limit closes with 1009; an OBJECT beyond the
// window closes with 4429 (bytes beyond the credit: test/ingest/frames.prop.test.ts); a bad token closes with 4401; a key revoked while connected ends the
// connection with 4401, and a refused object is an ACK with the native API's problem object;
// the objects of one turn, written as one batch, are each committed or refused on their own.
// Method: `lightwell serve` on loopback, a raw WebSocket (ws) speaking the frames of
// src/ingest/frames.ts, and reads through the native API.

import t from 'tap';
import { readFileSync } from 'node:fs';
import WebSocket from 'ws';
import { Service, type DataClient } from '../helpers/service.js';
import {
  PROTOCOL_VERSION,
  decodeServerFrame,
  encodeHello,
  encodeObject,
  type AckFrame,
  type ObjectHeader,
  type ServerFrame,
  type WelcomeFrame,
} from '../../src/ingest/frames.js';

const header = (sequence: number, key: string, size: number): ObjectHeader => ({
  sequence,
  size,
  bucket: '',
  key,
  contentType: '',
  metadata: [],
  checksums: [],
  idempotencyKey: '',
  ifMatch: '',
  ifNoneMatch: false,
});

/** A raw connection: frames received in order, and how it closed. */
class Raw {
  readonly frames: ServerFrame[] = [];
  readonly socket: WebSocket;
  readonly closed: Promise<{ code: number; reason: string }>;
  private waiters: Array<() => void> = [];

  constructor(url: string) {
    this.socket = new WebSocket(url, { perMessageDeflate: false });
    this.socket.on('message', (data: Buffer) => {
      this.frames.push(decodeServerFrame(data));
      for (const wake of this.waiters.splice(0)) wake();
    });
    this.closed = new Promise((resolve) =>
      this.socket.on('close', (code, reason) => {
        resolve({ code, reason: reason.toString() });
        for (const wake of this.waiters.splice(0)) wake();
      }),
    );
    this.socket.on('error', () => undefined);
  }

  async opened(): Promise<void> {
    if (this.socket.readyState === WebSocket.OPEN) return;
    await new Promise<void>((resolve, reject) => {
      this.socket.once('open', () => resolve());
      this.socket.once('error', reject);
    });
  }

  /** Waits for a frame that `match` accepts (or the close). */
  async frame<F extends ServerFrame>(match: (frame: ServerFrame) => boolean): Promise<F> {
    for (;;) {
      const found = this.frames.find(match);
      if (found) return found as F;
      if (this.socket.readyState === WebSocket.CLOSED) throw new Error('closed before the frame');
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  async hello(token: string, bucket = 'logs'): Promise<WelcomeFrame> {
    await this.opened();
    this.socket.send(encodeHello({ version: PROTOCOL_VERSION, token, bucket }));
    return this.frame<WelcomeFrame>((f) => f.type === 0x81);
  }

  ack(sequence: number): Promise<AckFrame> {
    return this.frame<AckFrame>((f) => f.type === 0x82 && f.sequence === sequence);
  }
}

t.test('refusals', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const data: DataClient = await service.tenant('acme');
  t.equal((await data.request('POST', '/buckets', { json: { name: 'logs' } })).status, 201);
  const url = `${service.publicUrl.replace(/^http/, 'ws')}/ingest`;

  t.test(
    'a malformed frame: 4400, the open object not committed, the acknowledged ones kept',
    async (t) => {
      const raw = new Raw(url);
      await raw.hello(data.token);
      raw.socket.send(encodeObject(header(1, 'kept', 4), Buffer.from('kept')));
      t.match(await raw.ack(1), { status: 200, refused: false });
      raw.socket.send(encodeObject(header(2, 'partial', 10), Buffer.from('part')));
      raw.socket.send(Buffer.from([0x03, 0xff, 0, 0])); // DATA with unknown flags, too short
      const closed = await raw.closed;
      t.equal(closed.code, 4400);
      t.match(closed.reason, /^bad_request: /);
      t.equal((await data.get('logs', 'kept')).bytes.toString(), 'kept');
      t.equal((await data.get('logs', 'partial')).status, 404, 'nothing of the open object');
    },
  );

  t.test('the 101 of the upgrade carries X-Request-Id, as every answer does', async (t) => {
    const socket = new WebSocket(url, { perMessageDeflate: false });
    const upgrade = await new Promise<{ headers: Record<string, unknown> }>((resolve, reject) => {
      socket.once('upgrade', resolve);
      socket.once('error', reject);
    });
    t.match(upgrade.headers['x-request-id'], /^[A-Za-z0-9_-]{10,}$/);
    socket.close();
  });

  t.test('a frame over the limit: 1009', async (t) => {
    const raw = new Raw(url);
    const welcome = await raw.hello(data.token);
    raw.socket.send(Buffer.alloc(welcome.frameBytesMax + 1, 0x03));
    t.equal((await raw.closed).code, 1009);
  });

  t.test('an OBJECT beyond the window: 4429', async (t) => {
    const raw = new Raw(url);
    const welcome = await raw.hello(data.token);
    // The engine is stopped while the objects go out, so none of them can be committed and
    // acknowledged (which would give its place in the window back) before the last one arrives.
    const engine = enginePid(service);
    process.kill(engine, 'SIGSTOP');
    try {
      for (let i = 0; i <= welcome.windowObjects; i += 1)
        raw.socket.send(encodeObject(header(i, `w/${i}`, 0)));
      t.equal((await raw.closed).code, 4429);
    } finally {
      process.kill(engine, 'SIGCONT');
    }
  });

  t.test('a bad token: 4401; a version not spoken: 4426', async (t) => {
    const raw = new Raw(url);
    await raw.opened();
    raw.socket.send(encodeHello({ version: PROTOCOL_VERSION, token: 'lwtk_forged', bucket: '' }));
    t.equal((await raw.closed).code, 4401);
    const old = new Raw(url);
    await old.opened();
    old.socket.send(encodeHello({ version: 9, token: data.token, bucket: '' }));
    const closed = await old.closed;
    t.equal(closed.code, 4426);
    t.match(closed.reason, /supported: 1/);
  });

  t.test('a missing bucket in HELLO: 4404; in an OBJECT: a refused ACK', async (t) => {
    const raw = new Raw(url);
    await raw.opened();
    raw.socket.send(encodeHello({ version: PROTOCOL_VERSION, token: data.token, bucket: 'nope' }));
    t.equal((await raw.closed).code, 4404);
    const other = new Raw(url);
    await other.hello(data.token);
    other.socket.send(encodeObject({ ...header(1, 'k', 1), bucket: 'nope' }, Buffer.from('x')));
    const ack = await other.ack(1);
    t.match(ack, { refused: true, status: 404, json: { code: 'not_found', status: 404 } });
    other.socket.close(1000);
  });

  t.test("a turn's objects are written as one batch, each answered on its own", async (t) => {
    const raw = new Raw(url);
    await raw.hello(data.token);
    // The gateway is stopped while the frames go out, so that it reads them all in one turn and
    // hands them to the service as one batch.
    const gateway = processOf(service, 'lightwell-gateway');
    process.kill(gateway, 'SIGSTOP');
    try {
      raw.socket.send(encodeObject(header(1, 'batch/a', 5), Buffer.from('first')));
      raw.socket.send(
        encodeObject(
          { ...header(2, 'batch/b', 5), checksums: [['CRC32C', new Uint8Array(4)]] },
          Buffer.from('wrong'),
        ),
      );
      raw.socket.send(encodeObject({ ...header(3, 'k', 1), bucket: 'nope' }, Buffer.from('x')));
      // Committed after batch/a in the same group: its If-None-Match sees batch/a.
      raw.socket.send(
        encodeObject({ ...header(4, 'batch/a', 6), ifNoneMatch: true }, Buffer.from('second')),
      );
      raw.socket.send(encodeObject(header(5, 'batch/e', 4), Buffer.from('last')));
    } finally {
      process.kill(gateway, 'SIGCONT');
    }
    t.match(await raw.ack(1), { status: 200, refused: false, json: { key: 'batch/a', size: 5 } });
    t.match(await raw.ack(2), { status: 400, refused: true, json: { code: 'checksum_mismatch' } });
    t.match(await raw.ack(3), { status: 404, refused: true, json: { code: 'not_found' } });
    t.match(await raw.ack(4), { status: 412, refused: true });
    t.match(await raw.ack(5), { status: 200, refused: false, json: { key: 'batch/e' } });
    t.equal((await data.get('logs', 'batch/a')).bytes.toString(), 'first');
    t.equal((await data.get('logs', 'batch/b')).status, 404, 'nothing of the refused body');
    t.equal((await data.get('logs', 'batch/e')).bytes.toString(), 'last');
    raw.socket.close(1000);
  });

  t.test('a key revoked while connected: 4401', async (t) => {
    const owner = service.adminToken();
    const key = await service.admin('POST', '/tenants/acme/keys', owner, {
      accountId: 'app',
      scopes: 'read,write',
    });
    const { accessKeyId, secretKey } = key.json as { accessKeyId: string; secretKey: string };
    const basic = Buffer.from(`${accessKeyId}:${secretKey}`).toString('base64');
    const minted = await fetch(`${service.publicUrl}/auth/token`, {
      method: 'POST',
      headers: { Authorization: `Basic ${basic}` },
    });
    const { token } = (await minted.json()) as { token: string };
    const raw = new Raw(url);
    await raw.hello(token);
    raw.socket.send(encodeObject(header(1, 'before-revoke', 1), Buffer.from('x')));
    t.match(await raw.ack(1), { status: 200 });
    const revoked = await service.admin('POST', `/tenants/acme/keys/${accessKeyId}/revoke`, owner, {
      reason: 'the ingest test revokes it',
    });
    t.equal(revoked.status, 200);
    // No object needs to come: the server's check of its connections ends this one.
    const closed = await raw.closed;
    t.equal(closed.code, 4401);
  });
});

/** The engine process of a running service (its command line names `lightwell-engine.js`). */
function enginePid(running: Service): number {
  return processOf(running, 'lightwell-engine');
}

/** The process of a running service whose command line names `name`. */
function processOf(running: Service, name: string): number {
  const pid = running
    .pids()
    .find((candidate) => readFileSync(`/proc/${candidate}/cmdline`, 'utf8').includes(name));
  if (pid === undefined) throw new TypeError(`the service has no ${name} process`);
  return pid;
}
