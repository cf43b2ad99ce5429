// Goal: the GET path sends exactly the requested bytes whether a chunk's plaintext arrives in
// download-arena blocks or as a transferred ArrayBuffer; a read waits for the download's own
// blocks while it has reads in flight, and transfers only when it has none (so a full arena
// never stalls a download); every block goes back to the arena: after a complete response,
// after the client went away with reads still in flight, and after a read failed; blocks a read
// did not fill are never sent; a download reads 6 pieces ahead, and up to 16 while the arena
// stays half free. A small object read without waiting (`readChunkNow`) goes out exact, also
// when the socket takes only part of it and the shared buffer it was decrypted into is reused
// by the next response before the rest is sent; one that cannot be read so goes the waiting way.
// A read task's chunk id owns its memory, so the task carries no other bytes to the worker.
// A body that falls short of the object's size (its chunks and size disagree) cuts the
// connection after what it has, both ways.
// Method: `sendObject` with a real BodyArena of 64 KiB blocks (two, or room for every read), a
// pool stand-in that fills the named blocks (or answers an ArrayBuffer) as the worker does and
// counts reads in flight, and a recording uWS response that copies what it is given (uWS sends
// or copies before `tryEnd` returns).
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { BodyArena } from '../../src/service/body-arena.js';
import { sendObject, type DownloadServices } from '../../src/service/download.js';
import { packChunkRefs } from '../../src/engine/ops/objects.js';
import type { ObjectVersionRecord } from '../../src/engine/index/schema.js';
import type { Exchange } from '../../src/http/exchange.js';
import type { ReadTask, TaskRunner, TenantKeyMaterial } from '../../src/workers/protocol.js';
import type { ChunkStoreDeps } from '../../src/workers/chunk-store.js';
import { chunkIdOf, encodeChunk } from '../../src/engine/chunk-codec.js';
import { tenantKeysOf } from '../../src/service/upload.js';

const BLOCK = 64 * 1024;
const KEYS: TenantKeyMaterial = {
  tenantNum: 1,
  dataKey: new Uint8Array(32),
  dedupKey: new Uint8Array(32),
};

interface Fixture {
  readonly arena: BodyArena;
  readonly services: DownloadServices;
  readonly version: ObjectVersionRecord;
  readonly body: Buffer;
  /** Blocks named by read tasks, over the whole test. */
  readonly blocksUsed: number[];
  /** Reads answered with an ArrayBuffer. */
  transferred: number;
  /** Most pool reads in flight at once. */
  inFlightMax: number;
}

/** An object of chunks of these sizes (all above the inline limit), and a pool that reads them. */
function fixture(
  sizes: readonly number[],
  options: { delayMs?: number; failChunk?: number; shortChunk?: number; blocks?: number } = {},
): Fixture {
  const arena = new BodyArena(BLOCK, options.blocks ?? 2);
  const chunks = sizes.map((size) => ({ id: randomBytes(32), plain: randomBytes(size) }));
  const byId = new Map(
    chunks.map((chunk, index) => [chunk.id.toString('hex'), { ...chunk, index }]),
  );
  const used: number[] = [];
  const fixtureState = { transferred: 0, inFlight: 0, inFlightMax: 0 };
  const pool = {
    run: async (task: ReadTask) => {
      fixtureState.inFlight += 1;
      fixtureState.inFlightMax = Math.max(fixtureState.inFlightMax, fixtureState.inFlight);
      await new Promise((resolve) => setTimeout(resolve, options.delayMs ?? 0));
      fixtureState.inFlight -= 1;
      const chunk = byId.get(Buffer.from(task.chunkId).toString('hex'));
      if (!chunk) throw new TypeError('unknown chunk');
      if (chunk.index === options.failChunk) {
        return { ok: false, error: { code: 'corrupt_data', message: 'bad record' } };
      }
      if (task.into) {
        used.push(...task.into);
        task.into.forEach((block, i) => {
          arena.bytes.set(chunk.plain.subarray(i * BLOCK, (i + 1) * BLOCK), block * BLOCK);
        });
        return chunk.index === options.shortChunk ? chunk.plain.length - 1 : chunk.plain.length;
      }
      fixtureState.transferred += 1;
      return new Uint8Array(chunk.plain).buffer;
    },
  };
  const version = {
    size: sizes.reduce((sum, size) => sum + size, 0),
    chunks: packChunkRefs(chunks.map(({ id, plain }) => ({ id, plainLength: plain.length }))),
  } as unknown as ObjectVersionRecord;
  const services: DownloadServices = {
    arena,
    pool,
    inline: {} as ChunkStoreDeps,
  };
  return {
    arena,
    services,
    version,
    body: Buffer.concat(chunks.map(({ plain }) => plain)),
    blocksUsed: used,
    get transferred() {
      return fixtureState.transferred;
    },
    get inFlightMax() {
      return fixtureState.inFlightMax;
    },
  };
}

/** A uWS response that takes every write whole; `closeAfter` writes, the client goes away. */
function recordingExchange(closeAfter = Infinity) {
  const sent: Buffer[] = [];
  let writes = 0;
  let closed = false;
  const res = {
    cork: (fn: () => void) => fn(),
    writeStatus: () => res,
    writeHeader: () => res,
    getWriteOffset: () => sent.reduce((sum, bytes) => sum + bytes.length, 0),
    tryEnd: (bytes: Uint8Array, total: number) => {
      sent.push(Buffer.from(bytes)); // uWS sends or copies before it returns
      writes += 1;
      if (writes >= closeAfter) exchange.aborted = true;
      return [true, res.getWriteOffset() === total];
    },
    onWritable: () => undefined,
    close: () => {
      closed = true;
    },
  };
  const exchange = exchangeOf(res);
  return {
    exchange: exchange as unknown as Exchange,
    body: () => Buffer.concat(sent),
    closed: () => closed,
  };
}

/** The parts of an Exchange that sendObject uses, over a stand-in uWS response. */
function exchangeOf(res: object) {
  return {
    res,
    method: 'GET',
    requestId: 'test',
    status: 0,
    done: false,
    aborted: false,
    get open(): boolean {
      return !this.aborted && !this.done;
    },
    onAbort: () => undefined,
  };
}

/** Sends the fixture's object (or `range` of it) to `client`. */
async function send(
  f: Fixture,
  client: ReturnType<typeof recordingExchange>,
  range?: { start: number; end: number },
): Promise<void> {
  await sendObject(f.services, client.exchange, {
    keys: KEYS,
    version: f.version,
    range,
    headers: {},
  });
}

async function settle(): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, 50));
}

t.test('whole objects and ranges come out exact, through blocks and buffers', async (t) => {
  // 100 KiB chunks take both blocks, so each waits for the one before; 150 KiB never fits.
  const f = fixture([100 * 1024, 100 * 1024, 70 * 1024, 150 * 1024]);
  const ranges = [undefined, { start: 0, end: 0 }, { start: 65_000, end: 300_000 }];
  for (const range of ranges) {
    const client = recordingExchange();
    await send(f, client, range);
    const expected = range ? f.body.subarray(range.start, range.end + 1) : f.body;
    t.ok(client.body().equals(expected), `bytes ${range ? `${range.start}-${range.end}` : 'all'}`);
    t.equal(f.arena.available, 2, 'every block is back');
  }
  // Pieces per response: all four; the first; all four (65,000 to 300,000 reaches the last).
  t.equal(f.transferred, 2, 'only the chunk larger than the arena came as a buffer');
  t.equal(f.blocksUsed.length, 14, 'the others waited for blocks, two each');
});

t.test('a read task carries its chunk id alone, not the record it was cut from', async (t) => {
  const f = fixture([100 * 1024, 70 * 1024]);
  const tasks: ReadTask[] = [];
  const pool = f.services.pool;
  const run = pool.run.bind(pool);
  pool.run = (task) => {
    tasks.push(task as ReadTask);
    return run(task);
  };
  const client = recordingExchange();
  await send(f, client);
  t.ok(client.body().equals(f.body), 'the whole body');
  t.equal(tasks.length, 2);
  for (const task of tasks) {
    // A message to a worker copies the whole ArrayBuffer behind a view (see ownBytes).
    t.equal(task.chunkId.byteLength, 32);
    t.equal(task.chunkId.buffer.byteLength, 32, 'the chunk id owns its memory');
  }
});

t.test('a download with nothing in flight does not wait for a full arena', async (t) => {
  const f = fixture([100 * 1024, 100 * 1024]);
  const held = f.arena.tryTakeMany(2) as number[]; // other downloads hold every block
  const client = recordingExchange();
  await send(f, client);
  t.ok(client.body().equals(f.body), 'the whole body');
  t.equal(f.transferred, 2, 'both chunks came as buffers');
  f.arena.releaseAll(held);
  t.equal(f.arena.available, 2);
});

t.test('a client that goes away leaves no block behind', async (t) => {
  const f = fixture([90 * 1024, 90 * 1024, 90 * 1024, 90 * 1024], { delayMs: 5, blocks: 8 });
  const client = recordingExchange(1);
  await send(f, client);
  await settle();
  t.equal(f.arena.available, 8, 'reads still in flight gave their blocks back');
  t.equal(f.transferred, 0, 'every read went through the arena');
});

t.test('a failed read cuts the response and leaves no block behind', async (t) => {
  const f = fixture([90 * 1024, 90 * 1024, 90 * 1024], { failChunk: 1, blocks: 8 });
  const client = recordingExchange();
  await t.rejects(send(f, client), { code: 'corrupt_data' });
  t.ok(client.closed(), 'the connection is cut after part of the body');
  await settle();
  t.equal(f.arena.available, 8);
});

t.test('blocks a read did not fill are never sent', async (t) => {
  const f = fixture([90 * 1024, 90 * 1024], { shortChunk: 1, blocks: 8 });
  const client = recordingExchange();
  await t.rejects(send(f, client), { code: 'corrupt_data' });
  t.equal(client.body().length, 90 * 1024, 'only the first chunk went out');
  await settle();
  t.equal(f.arena.available, 8);
});

t.test('a download reads deeper ahead while the arena stays half free', async (t) => {
  // 90 KiB chunks take two blocks each. Six reads always; more while, after taking its blocks,
  // a read leaves at least half of the arena free; never more than sixteen.
  const cases = [
    { blocks: 64, expected: 16 }, // 16 reads leave 32 of 64 free
    { blocks: 40, expected: 10 }, // the 11th would leave 18 of 40
    { blocks: 16, expected: 6 }, // six hold 12 of 16
  ];
  for (const { blocks, expected } of cases) {
    const f = fixture(new Array<number>(24).fill(90 * 1024), { delayMs: 20, blocks });
    const client = recordingExchange();
    await send(f, client);
    t.ok(client.body().equals(f.body), `${blocks} blocks: the whole body`);
    t.equal(f.inFlightMax, expected, `${blocks} blocks: ${expected} reads in flight at most`);
    t.equal(f.transferred, 0, `${blocks} blocks: every read went through the arena`);
    t.equal(f.arena.available, blocks, `${blocks} blocks: every block is back`);
  }
});

/**
 * Small objects (one chunk each, under the inline limit) stored as real encrypted records,
 * read by a stand-in segment reader that reads now unless `waits`, and counts each way.
 */
function smallObjects(sizes: readonly number[], waits = false) {
  const keys = tenantKeysOf(KEYS);
  const records = new Map<string, { record: Buffer; payloadChecksum: number }>();
  const objects = sizes.map((size) => {
    const plain = randomBytes(size);
    const id = chunkIdOf(keys.dedupKey, [plain]);
    const encoded = encodeChunk(keys, id, [plain], size);
    const record = Buffer.concat([encoded.header, ...encoded.payload]);
    records.set(id.toString('hex'), { record, payloadChecksum: encoded.payloadChecksum });
    const version = { size, chunks: packChunkRefs([{ id, plainLength: size }]) };
    return { plain, version: version as unknown as ObjectVersionRecord };
  });
  const counts = { now: 0, waited: 0 };
  let looked: { record: Buffer; payloadChecksum: number } | undefined;
  const location = () => ({
    segmentId: 1,
    offset: 0,
    length: looked?.record.length ?? 0,
    payloadChecksum: looked?.payloadChecksum ?? 0,
  });
  const inline = {
    deadChunkGraceMs: 0,
    index: () => ({
      refresh: () => undefined,
      get: (_db: unknown, key: Buffer) => {
        looked = records.get(key.subarray(key.length - 32).toString('hex'));
        return looked && location();
      },
    }),
    reader: () => ({
      readNow: (_at: unknown, use: (bytes: Buffer) => unknown) => {
        if (waits) return undefined;
        counts.now += 1;
        return use(Buffer.from(looked?.record ?? Buffer.alloc(0)));
      },
      readWith: async (_at: unknown, use: (bytes: Buffer) => unknown) => {
        await new Promise((resolve) => setImmediate(resolve));
        counts.waited += 1;
        return use(Buffer.from(looked?.record ?? Buffer.alloc(0)));
      },
    }),
  } as unknown as ChunkStoreDeps;
  const services: DownloadServices = {
    arena: new BodyArena(BLOCK, 2),
    pool: {} as TaskRunner,
    inline,
  };
  return { objects, services, counts };
}

/** A uWS response that takes only `first` bytes of the first write, the rest when writable. */
function slowExchange(first: number) {
  const sent: Buffer[] = [];
  let offset = 0;
  let writes = 0;
  let writable: ((offset: number) => boolean) | undefined;
  let closed = false;
  const res = {
    cork: (fn: () => void) => fn(),
    writeStatus: () => res,
    writeHeader: () => res,
    getWriteOffset: () => offset,
    tryEnd: (bytes: Uint8Array, total: number) => {
      writes += 1;
      const taken = writes === 1 ? Math.min(first, bytes.length) : bytes.length;
      sent.push(Buffer.from(bytes.subarray(0, taken)));
      offset += taken;
      return [taken === bytes.length, offset === total];
    },
    onWritable: (handler: (offset: number) => boolean) => {
      writable = handler;
    },
    close: () => {
      closed = true;
    },
  };
  return {
    exchange: exchangeOf(res) as unknown as Exchange,
    body: () => Buffer.concat(sent),
    drain: () => writable?.(offset),
    closed: () => closed,
  };
}

t.test('a small object read without waiting goes out exact, also in two writes', async (t) => {
  const { objects, services, counts } = smallObjects([4096, 65_536, 1]);
  const [a, b, c] = objects as [(typeof objects)[0], (typeof objects)[0], (typeof objects)[0]];
  const partly = slowExchange(1000);
  const first = sendObject(services, partly.exchange, {
    keys: KEYS,
    version: a.version,
    range: undefined,
    headers: {},
  });
  // The next response reuses the buffer that the first one's plaintext was decrypted into.
  const whole = slowExchange(Infinity);
  await sendObject(services, whole.exchange, {
    keys: KEYS,
    version: b.version,
    range: { start: 10, end: 60_000 },
    headers: {},
  });
  t.ok(whole.body().equals(b.plain.subarray(10, 60_001)), 'a range of a 64 KiB object');
  partly.drain();
  await first;
  t.ok(partly.body().equals(a.plain), 'the first object, sent in two writes, is its own bytes');
  const tiny = slowExchange(Infinity);
  await sendObject(services, tiny.exchange, {
    keys: KEYS,
    version: c.version,
    range: undefined,
    headers: {},
  });
  t.ok(tiny.body().equals(c.plain), 'a 1-byte object');
  t.same(counts, { now: 3, waited: 0 }, 'every read was made now');
});

t.test('a small object that cannot be read now is read the waiting way', async (t) => {
  const { objects, services, counts } = smallObjects([5000], true);
  const client = slowExchange(Infinity);
  const [only] = objects as [(typeof objects)[0]];
  await sendObject(services, client.exchange, {
    keys: KEYS,
    version: only.version,
    range: undefined,
    headers: {},
  });
  t.ok(client.body().equals(only.plain));
  t.same(counts, { now: 0, waited: 1 });
});

t.test("a body shorter than the object's size cuts the connection", async (t) => {
  const f = fixture([90 * 1024], { blocks: 8 });
  const client = recordingExchange();
  const longer = { ...f.version, size: f.version.size + 10 };
  await t.rejects(
    sendObject(f.services, client.exchange, {
      keys: KEYS,
      version: longer,
      range: undefined,
      headers: {},
    }) ?? Promise.resolve(),
    { code: 'corrupt_data' },
  );
  t.ok(client.closed(), 'large: cut');
  t.equal(client.body().length, 90 * 1024, 'large: the bytes there are');
  t.equal(client.exchange.status, 500, 'large: audited as an error');

  const { objects, services } = smallObjects([4096]);
  const [only] = objects as [(typeof objects)[0]];
  const small = slowExchange(Infinity);
  t.throws(
    () =>
      sendObject(services, small.exchange, {
        keys: KEYS,
        version: { ...only.version, size: 4100 },
        range: undefined,
        headers: {},
      }),
    { code: 'corrupt_data' },
  );
  t.ok(small.closed(), 'small, read now: cut');
  t.ok(small.body().equals(only.plain), 'small: the bytes there are');
});
