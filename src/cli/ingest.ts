// `lightwell ingest DIR --bucket B [--prefix P] [--endpoint URL] [--connections N]`: uploads a
// directory tree through the ingest stream (lightwell/client), over N connections, with a
// progress bar on a terminal.
//
// Credentials: `--token`, or `--access-key-id` and `--secret-key` (the client mints and renews
// its token), else the environment: LIGHTWELL_TOKEN, or LIGHTWELL_ACCESS_KEY_ID and
// LIGHTWELL_SECRET_KEY. The endpoint defaults to LIGHTWELL_ENDPOINT, else http://127.0.0.1:9000.
//
// Resuming (docs/ingest-cli.md): a journal file records every object the service acknowledged
// (so durable): its key, size and modification time. A run skips the files the journal holds
// with the same size and time, so an interrupted upload started again sends only what was not
// acknowledged. An object acknowledged just before an interruption and not yet journaled is
// sent again (a second write of the same bytes, deduplicated in storage).
//
// Exit codes as every command: 0 when every file was stored, 1 when any failed (a summary on
// stderr names them), 2 for a usage error.

import { createReadStream } from 'node:fs';
import { open, opendir, readFile, stat, mkdir, type FileHandle } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { homedir } from 'node:os';
import { join, relative, resolve, sep } from 'node:path';
import { crc32c } from '../util/crc32c.js';
import {
  LightwellClient,
  LightwellProblem,
  type PutItem,
  type PutResult,
  type PutOutcome,
  type ClientOptions,
} from '../client/index.js';
import {
  parseArgs,
  failureText,
  isUsageError,
  UsageError,
  EXIT_FAILURE,
  EXIT_USAGE,
  type CommandSpec,
} from './args.js';

const USAGE =
  'usage: lightwell ingest DIR --bucket B [--prefix P] [--endpoint URL] [--connections N]\n' +
  '         [--token T | --access-key-id ID --secret-key S] [--journal FILE] [--no-progress]\n' +
  '  (credentials also from LIGHTWELL_TOKEN, or LIGHTWELL_ACCESS_KEY_ID and LIGHTWELL_SECRET_KEY;\n' +
  '   the endpoint from LIGHTWELL_ENDPOINT)';

const COMMAND: CommandSpec = {
  options: new Set([
    'bucket',
    'prefix',
    'endpoint',
    'connections',
    'token',
    'access-key-id',
    'secret-key',
    'journal',
  ]),
  flags: new Set(['no-progress']),
  positional: true,
};

/** Files up to this size are read whole and held until acknowledged; larger ones are re-read. */
const IN_MEMORY_BYTES_MAX = 64 * 1024;
const CONNECTIONS_MAX = 64;
const FAILURES_SHOWN_MAX = 20;
const PROGRESS_INTERVAL_MS = 250;

interface Plan {
  readonly dir: string;
  readonly bucket: string;
  readonly prefix: string;
  readonly connections: number;
  readonly client: ClientOptions;
  readonly journal: string;
  readonly progress: boolean;
}

export async function ingestCommand(argv: readonly string[]): Promise<void> {
  try {
    const args = parseArgs(argv, COMMAND);
    if (args.flags.has('help')) {
      process.stdout.write(`${USAGE}\n`);
      return;
    }
    const plan = planOf(args.positional, args.options, args.flags);
    const failed = await run(plan);
    process.exitCode = failed > 0 ? EXIT_FAILURE : 0;
  } catch (error) {
    process.stderr.write(`lightwell ingest: ${failureText(error)}\n`);
    process.exitCode = isUsageError(error) ? EXIT_USAGE : EXIT_FAILURE;
  }
}

function planOf(
  positional: readonly string[],
  options: ReadonlyMap<string, string>,
  flags: ReadonlySet<string>,
): Plan {
  if (positional.length !== 1) throw UsageError(USAGE);
  const bucket = options.get('bucket');
  if (bucket === undefined) throw UsageError('--bucket is required');
  const connections = Number(options.get('connections') ?? '1');
  if (!Number.isInteger(connections) || connections < 1 || connections > CONNECTIONS_MAX)
    throw UsageError(`--connections must be 1 to ${CONNECTIONS_MAX}`);
  const env = process.env;
  const endpoint = options.get('endpoint') ?? env['LIGHTWELL_ENDPOINT'] ?? 'http://127.0.0.1:9000';
  const token = options.get('token') ?? env['LIGHTWELL_TOKEN'];
  const accessKeyId = options.get('access-key-id') ?? env['LIGHTWELL_ACCESS_KEY_ID'];
  const secretKey = options.get('secret-key') ?? env['LIGHTWELL_SECRET_KEY'];
  let client: ClientOptions;
  if (accessKeyId !== undefined && secretKey !== undefined)
    client = { endpoint, accessKeyId, secretKey };
  else if (token !== undefined) client = { endpoint, token };
  else throw UsageError('give --token, or --access-key-id and --secret-key (or the environment)');
  const dir = resolve(positional[0] as string);
  const prefix = options.get('prefix') ?? '';
  const journal = options.get('journal') ?? defaultJournal(endpoint, bucket, prefix, dir);
  const progress = !flags.has('no-progress') && process.stderr.isTTY;
  return { dir, bucket, prefix, connections, client, journal, progress };
}

/** ~/.cache/lightwell/ingest-<digest>.journal: one per endpoint, bucket, prefix and directory. */
function defaultJournal(endpoint: string, bucket: string, prefix: string, dir: string): string {
  const digest = createHash('sha256')
    .update(JSON.stringify([endpoint, bucket, prefix, dir]))
    .digest('hex')
    .slice(0, 16);
  const cache = process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache');
  return join(cache, 'lightwell', `ingest-${digest}.journal`);
}

interface Counts {
  files: number;
  bytes: number;
  skipped: number;
  done: number;
  doneBytes: number;
  readonly failures: string[];
  failed: number;
  walked: boolean;
}

/** Uploads the tree; returns how many files failed. */
async function run(plan: Plan): Promise<number> {
  const info = await stat(plan.dir);
  if (!info.isDirectory()) throw UsageError(`${plan.dir} is not a directory`);
  const journal = await Journal.open(plan.journal);
  const counts: Counts = {
    files: 0,
    bytes: 0,
    skipped: 0,
    done: 0,
    doneBytes: 0,
    failures: [],
    failed: 0,
    walked: false,
  };
  const client = new LightwellClient(plan.client);
  const items = sharedIterator(itemsOf(plan, journal, counts));
  const started = Date.now();
  const bar = plan.progress
    ? setInterval(() => drawProgress(counts, started), PROGRESS_INTERVAL_MS)
    : undefined;
  try {
    await Promise.all(
      Array.from({ length: plan.connections }, () =>
        upload(client, plan.bucket, items, counts, journal),
      ),
    );
  } finally {
    clearInterval(bar);
    await journal.close();
  }
  if (plan.progress) drawProgress(counts, started, true);
  summarize(counts, started);
  return counts.failed;
}

async function upload(
  client: LightwellClient,
  bucket: string,
  items: AsyncIterable<PutItem & { mtimeMs: number }>,
  counts: Counts,
  journal: Journal,
): Promise<void> {
  const stream = client.ingest(bucket);
  const sizes = new Map<string, { size: number; mtimeMs: number }>();
  async function* tracked(): AsyncGenerator<PutItem> {
    for await (const item of items) {
      sizes.set(item.key, { size: sizeOfBody(item), mtimeMs: item.mtimeMs });
      yield item;
    }
  }
  try {
    for await (const outcome of stream.putAll(tracked())) settle(outcome, sizes, counts, journal);
  } finally {
    await stream.close().catch(() => undefined);
  }
}

function settle(
  outcome: PutOutcome,
  sizes: Map<string, { size: number; mtimeMs: number }>,
  counts: Counts,
  journal: Journal,
): void {
  const entry = sizes.get(outcome.key);
  sizes.delete(outcome.key);
  const error = (outcome as { error?: unknown }).error;
  if (error instanceof LightwellProblem) {
    counts.failed += 1;
    if (counts.failures.length < FAILURES_SHOWN_MAX)
      counts.failures.push(`${outcome.key}: ${error.status} ${error.code}: ${error.message}`);
    return;
  }
  counts.done += 1;
  counts.doneBytes += (outcome as PutResult).size;
  if (entry) journal.record(outcome.key, entry.size, entry.mtimeMs);
}

function sizeOfBody(item: PutItem): number {
  const body = item.body;
  return typeof body === 'string'
    ? Buffer.byteLength(body)
    : body instanceof Uint8Array
      ? body.length
      : body.size;
}

/** The files of the tree as put items, skipping what the journal holds. */
async function* itemsOf(
  plan: Plan,
  journal: Journal,
  counts: Counts,
): AsyncGenerator<PutItem & { mtimeMs: number }> {
  for await (const path of walk(plan.dir)) {
    const info = await stat(path);
    const key = plan.prefix + relative(plan.dir, path).split(sep).join('/');
    counts.files += 1;
    counts.bytes += info.size;
    if (journal.holds(key, info.size, info.mtimeMs)) {
      counts.skipped += 1;
      counts.doneBytes += info.size;
      continue;
    }
    if (info.size <= IN_MEMORY_BYTES_MAX) {
      yield { key, body: await readFile(path), mtimeMs: info.mtimeMs };
      continue;
    }
    // A CRC32C first, so that the object carries a checksum and an idempotency key.
    const crc = await fileCrc32c(path);
    yield {
      key,
      body: { size: info.size, open: () => createReadStream(path) },
      checksums: { CRC32C: crc },
      mtimeMs: info.mtimeMs,
    };
  }
  counts.walked = true;
}

async function* walk(dir: string): AsyncGenerator<string> {
  const entries = await opendir(dir);
  const names: Array<{ name: string; directory: boolean }> = [];
  for await (const entry of entries) {
    if (entry.isDirectory()) names.push({ name: entry.name, directory: true });
    else if (entry.isFile()) names.push({ name: entry.name, directory: false });
  }
  names.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const { name, directory } of names) {
    const path = join(dir, name);
    if (directory) yield* walk(path);
    else yield path;
  }
}

async function fileCrc32c(path: string): Promise<string> {
  let crc = 0;
  for await (const part of createReadStream(path)) crc = crc32c(part as Buffer, crc);
  const digest = Buffer.alloc(4);
  digest.writeUInt32BE(crc >>> 0);
  return digest.toString('base64');
}

/** One iterator shared by several consumers (each `next` is answered in turn). */
function sharedIterator<T>(source: AsyncIterator<T>): AsyncIterable<T> {
  let chain: Promise<unknown> = Promise.resolve();
  const next = (): Promise<IteratorResult<T>> => {
    const result = chain.then(() => source.next());
    chain = result.catch(() => undefined);
    return result;
  };
  return { [Symbol.asyncIterator]: () => ({ next }) };
}

/** The keys acknowledged by earlier runs: `size<TAB>mtimeMs<TAB>key` lines, appended. */
class Journal {
  private readonly done = new Map<string, string>();
  private lines: string[] = [];
  private writing: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;

  private constructor(private readonly handle: FileHandle) {}

  static async open(path: string): Promise<Journal> {
    await mkdir(resolve(path, '..'), { recursive: true });
    const text = await readFile(path, 'utf8').catch(() => '');
    const journal = new Journal(await open(path, 'a'));
    for (const line of text.split('\n')) {
      const [size = '', mtime = '', ...key] = line.split('\t');
      if (key.length > 0) journal.done.set(key.join('\t'), `${size}\t${mtime}`);
    }
    return journal;
  }

  holds(key: string, size: number, mtimeMs: number): boolean {
    return this.done.get(key) === `${size}\t${Math.floor(mtimeMs)}`;
  }

  record(key: string, size: number, mtimeMs: number): void {
    this.lines.push(`${size}\t${Math.floor(mtimeMs)}\t${key}\n`);
    this.timer ??= setTimeout(() => this.flush(), 100);
  }

  private flush(): void {
    this.timer = undefined;
    const text = this.lines.join('');
    this.lines = [];
    if (text)
      this.writing = this.writing.then(() => this.handle.appendFile(text).then(() => undefined));
  }

  async close(): Promise<void> {
    clearTimeout(this.timer);
    this.flush();
    await this.writing;
    await this.handle.close();
  }
}

function drawProgress(counts: Counts, started: number, last = false): void {
  const seconds = Math.max(0.001, (Date.now() - started) / 1000);
  const rate = counts.doneBytes / seconds;
  const left = counts.bytes - counts.doneBytes;
  const eta = counts.walked && rate > 0 ? formatDuration(left / rate) : '?';
  const total = counts.walked ? String(counts.files) : `${counts.files}+`;
  const line =
    `objects ${counts.done + counts.skipped}/${total}  ` +
    `${formatBytes(counts.doneBytes)}/${formatBytes(counts.bytes)}  ` +
    `${formatBytes(rate)}/s  ${(counts.done / seconds).toFixed(0)} obj/s  ETA ${eta}` +
    (counts.failed > 0 ? `  failed ${counts.failed}` : '');
  process.stderr.write(`\r\x1b[2K${line}${last ? '\n' : ''}`);
}

function summarize(counts: Counts, started: number): void {
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  process.stderr.write(
    `lightwell ingest: ${counts.done} stored, ${counts.skipped} already stored, ` +
      `${counts.failed} failed, ${formatBytes(counts.doneBytes)} in ${seconds} s\n`,
  );
  for (const failure of counts.failures) process.stderr.write(`  failed: ${failure}\n`);
  if (counts.failed > counts.failures.length)
    process.stderr.write(`  … and ${counts.failed - counts.failures.length} more\n`);
}

function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit] ?? 'B'}`;
}

function formatDuration(seconds: number): string {
  const whole = Math.round(seconds);
  const minutes = Math.floor(whole / 60);
  return `${minutes}:${String(whole % 60).padStart(2, '0')}`;
}
