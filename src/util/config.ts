// Settings: one table of every setting with its type and default, and the loader that layers
// them: defaults, then a config file (`--config FILE`), then the environment (`LIGHTWELL_` +
// dotted name upper-cased, dots as underscores), then command-line flags. Every value remembers
// which of the four it came from, for `lightwell config`.
//
// A config file is TOML (`.toml`) or JSON (any other name), by its extension. TOML allows
// comments and is what people write by hand; JSON stays for files made by programs. Either
// may nest (`[security]` / `{"security": {"native_api_token_ttl": "2h"}}`) or use dotted keys.
// Unknown settings are refused, so a typo is an error at start and never a silently ignored
// value. A bad value from the environment or the file is refused with the variable or the file
// named, since no flag on the command line shows where it came from.

import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { BadRequest, InvalidSetting, isLightwellError } from './errors.js';

type Kind = 'string' | 'int' | 'bool' | 'duration' | 'bytes' | 'rate' | 'listen' | 'ratio';

/** Where a setting's value came from, lowest layer first. */
export type SettingSource = 'default' | 'file' | 'env' | 'flag';

export interface Rate {
  readonly perSecond: number;
  readonly burst: number;
}

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

interface SettingSpec {
  readonly kind: Kind;
  readonly fallback: string;
  readonly help: string;
  /** Bounds of an 'int' setting, inclusive. */
  readonly min?: number;
  readonly max?: number;
  /** The values a 'string' setting may take. */
  readonly choices?: readonly string[];
  /** A 'string' setting that may not be empty (an empty path would mean the current directory). */
  readonly nonEmpty?: boolean;
}

/** pino's levels, and `silent`: what `log.level` may be. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Every setting Lightwell reads. Values are written as a user would write them. */
export const settingSpecs = {
  data_dir: { kind: 'string', fallback: './data', nonEmpty: true, help: 'data directory' },
  public_listen: { kind: 'listen', fallback: '0.0.0.0:9000', help: 'public listener HOST:PORT' },
  admin_listen: { kind: 'listen', fallback: '127.0.0.1:9001', help: 'admin listener HOST:PORT' },
  gateways: {
    kind: 'int',
    fallback: '1',
    min: 1,
    max: 64,
    help: 'gateway processes started by serve',
  },
  workers: {
    kind: 'int',
    fallback: '0',
    min: 0,
    max: 256,
    help: 'worker threads per gateway (0: cores + 1, divided among the gateways)',
  },
  gateway_threads: {
    kind: 'int',
    fallback: '0',
    min: 0,
    max: 64,
    help:
      'listener threads per gateway, each an event loop on the public port' +
      ' (0: one per core up to 4, divided among the gateways, each with two uploads of the budget)',
  },
  'log.level': {
    kind: 'string',
    fallback: 'info',
    choices: LOG_LEVELS,
    help: LOG_LEVELS.join('|'),
  },
  'log.format': {
    kind: 'string',
    fallback: 'auto',
    choices: ['auto', 'json', 'pretty'],
    help: 'log lines as JSON, or one readable line each (auto: readable when stderr is a terminal)',
  },
  'log.access': {
    kind: 'bool',
    fallback: 'false',
    help: 'one log line per request (component access, level info); never tokens or signatures',
  },
  'shutdown.grace': {
    kind: 'duration',
    fallback: '30s',
    help: 'on SIGTERM, how long in-flight requests may take to finish before the stop',
  },
  'security.native_api_token_ttl': {
    kind: 'duration',
    fallback: '1h',
    help: 'bearer token lifetime',
  },
  'security.max_presign_ttl': { kind: 'duration', fallback: '7d', help: 'signed URL lifetime cap' },
  'security.token_mint_rate': {
    kind: 'rate',
    fallback: '10/s burst 20',
    help: 'token mints per access key',
  },
  'security.trusted_proxy': {
    kind: 'string',
    fallback: '',
    help: 'address of a TLS-terminating proxy',
  },
  'admin.rate_limit': {
    kind: 'rate',
    fallback: '50/s burst 100',
    help: 'admin requests per token',
  },
  'notifications.allow_private_targets': {
    kind: 'bool',
    fallback: 'false',
    help: 'allow private webhook targets',
  },
  'kms.new_tenant_keys': {
    kind: 'string',
    fallback: '',
    help: 'comma-separated KMS key ids every new tenant is created with',
  },
  's3.domains': {
    kind: 'string',
    fallback: '',
    help: 'comma-separated domains whose subdomains name S3 buckets (virtual-hosted style)',
  },
  's3.region': {
    kind: 'string',
    fallback: 'us-east-1',
    nonEmpty: true,
    help: 'region of S3 credential scopes and of GetBucketLocation',
  },
  'tls.cert_file': { kind: 'string', fallback: '', help: 'TLS certificate (PEM)' },
  'tls.key_file': { kind: 'string', fallback: '', help: 'TLS private key (PEM)' },
  'storage.segment_bytes_max': {
    kind: 'bytes',
    fallback: '256MiB',
    help: 'segment size before sealing',
  },
  'storage.direct_io': {
    kind: 'bool',
    fallback: 'true',
    help: 'write the pool and compaction segments with O_DIRECT where the file system allows',
  },
  'storage.chunk_bytes_avg': {
    kind: 'bytes',
    fallback: '1MiB',
    help: 'content-defined chunk target size',
  },
  'storage.compaction_live_ratio': {
    kind: 'ratio',
    fallback: '0.5',
    help: 'compact sealed segments below this live ratio (a number from 0 to 1)',
  },
  'storage.compaction_interval': {
    kind: 'duration',
    fallback: '30s',
    help: 'how often compaction looks for work',
  },
  'storage.dead_chunk_grace': {
    kind: 'duration',
    fallback: '15m',
    help: 'a dead chunk stays reusable this long',
  },
  'storage.space_reserve': {
    kind: 'bytes',
    fallback: '192MiB',
    help:
      'space kept back for compaction and the index on a full disk (at most an eighth of the ' +
      'file system; 0: none)',
  },
  'engine.connect_wait': {
    kind: 'duration',
    fallback: '30s',
    help: 'a gateway or admin process started before its engine waits this long for it',
  },
  'engine.call_timeout': {
    kind: 'duration',
    fallback: '15s',
    help: 'a request waiting on the engine longer than this is answered 503 with Retry-After',
  },
  'backup.directory': {
    kind: 'string',
    fallback: '',
    help: 'where the engine writes backups, one directory each (empty: backups are off)',
  },
  'keys.reencrypt_rate': {
    kind: 'bytes',
    fallback: '16MiB',
    help: 'chunk bytes a second that re-encryption after a data-key rotation reads (0: no limit)',
  },
  'storage.retired_segment_grace': {
    kind: 'duration',
    fallback: '60s',
    help: 'a compacted segment is deleted after',
  },
  'limits.object_bytes_max': { kind: 'bytes', fallback: '5TiB', help: 'largest single PUT body' },
  'limits.inflight_bytes_max': {
    kind: 'bytes',
    fallback: '64MiB',
    help: 'body bytes buffered, for uploads and again for downloads, shared among the gateways',
  },
  'limits.socket_receive_bytes': {
    kind: 'bytes',
    fallback: '256KiB',
    help: 'TCP receive buffer per public connection (0: kernel autotuning)',
  },
  'limits.body_rate_min': {
    kind: 'bytes',
    fallback: '1KiB',
    help: 'slowest request body kept open, bytes a second (at most 16KiB; 0: 16KiB)',
  },
  'idempotency.ttl': { kind: 'duration', fallback: '24h', help: 'idempotency keys expire after' },
  'audit.retention': { kind: 'duration', fallback: '90d', help: 'audit rows kept for' },
  'multipart.expiry': {
    kind: 'duration',
    fallback: '7d',
    help: 'abandoned multipart uploads expire after',
  },
  'lifecycle.interval': {
    kind: 'duration',
    fallback: '60s',
    help: 'how often the lifecycle executor reads what is due',
  },
  'logging.flush_interval': {
    kind: 'duration',
    fallback: '5s',
    help: 'an S3 access-log object is delivered once its oldest record is this old',
  },
  'lifecycle.day': {
    kind: 'duration',
    fallback: '1d',
    help: 'length of a lifecycle rule day (shorter only to test rules on a running service)',
  },
  'notifications.retry_backoff_min': {
    kind: 'duration',
    fallback: '1s',
    help: 'first webhook retry delay (doubles per attempt)',
  },
  'notifications.retry_backoff_max': {
    kind: 'duration',
    fallback: '1h',
    help: 'longest webhook retry delay',
  },
  'notifications.retry_window': {
    kind: 'duration',
    fallback: '24h',
    help: 'a failing webhook event is retried this long, then dropped',
  },
  'cluster.listen': {
    kind: 'string',
    fallback: '',
    help: 'cluster mode: the node-to-node listener HOST:PORT (empty: a single node, no cluster)',
  },
  'cluster.node_id': {
    kind: 'string',
    fallback: '',
    help: "cluster mode: this node's id, 1 to 63 of [a-z0-9-] starting with a letter",
  },
  'cluster.bootstrap': {
    kind: 'bool',
    fallback: 'false',
    help: 'cluster mode: start the first node of a new cluster (a flag: --cluster.bootstrap)',
  },
  'cluster.etcd_bin': { kind: 'string', fallback: 'etcd', help: 'the etcd server binary' },
  'cluster.etcd_client_listen': {
    kind: 'string',
    fallback: '',
    help: "this node's etcd member: client HOST:PORT (empty: cluster.listen's host, port 2379)",
  },
  'cluster.etcd_peer_listen': {
    kind: 'string',
    fallback: '',
    help: "this node's etcd member: peer HOST:PORT (empty: cluster.listen's host, port 2380)",
  },
  'cluster.etcd_endpoints': {
    kind: 'string',
    fallback: '',
    help: 'an existing etcd cluster (comma-separated URLs): this node then runs no etcd member',
  },
  'cluster.replication_factor': {
    kind: 'int',
    fallback: '3',
    min: 1,
    max: 7,
    help: 'copies of every partition (effective: at most the storage node count)',
  },
  'cluster.layout_poll': {
    kind: 'duration',
    fallback: '2s',
    help: 'how often a member reads the layout when no peer has named a newer one',
  },
  'cluster.rebalance_objects_per_s': {
    kind: 'int',
    fallback: '0',
    help: "a rebalance's pace: objects checked per second, all members together (0: no limit)",
  },
  'cluster.capacity': {
    kind: 'bytes',
    fallback: '0',
    help:
      "this node's storage as placement weighs it: its share of the partitions' replicas is " +
      "proportional (0: the average of the others'); read when the node bootstraps or is joined",
  },
  'cluster.lost_after': {
    kind: 'duration',
    fallback: '30m',
    help: 'a member down this long is marked lost and its replicas rebuilt',
  },
  'notifications.delivery_timeout': {
    kind: 'duration',
    fallback: '10s',
    help: 'one webhook delivery attempt may take this long',
  },
} as const satisfies Record<string, SettingSpec>;

export type SettingName = keyof typeof settingSpecs;

export interface Settings {
  readonly raw: Readonly<Record<SettingName, string>>;
  /** Where each value came from. */
  readonly sources: Readonly<Record<SettingName, SettingSource>>;
  string(name: SettingName): string;
  /** A 'ratio' setting: a number from 0 to 1. */
  ratio(name: SettingName): number;
  int(name: SettingName): number;
  bool(name: SettingName): boolean;
  /** Milliseconds. */
  duration(name: SettingName): number;
  bytes(name: SettingName): number;
  rate(name: SettingName): Rate;
  listen(name: SettingName): ListenAddress;
}

/**
 * The listeners' certificate and key files when set: the listeners serve HTTPS. `loadSettings`
 * refuses one without the other.
 */
export function tlsFilesOf(settings: Settings): { certFile: string; keyFile: string } | undefined {
  const certFile = settings.string('tls.cert_file');
  const keyFile = settings.string('tls.key_file');
  return certFile !== '' && keyFile !== '' ? { certFile, keyFile } : undefined;
}

export function isSettingName(name: string): name is SettingName {
  return Object.hasOwn(settingSpecs, name);
}

export function envName(name: string): string {
  return 'LIGHTWELL_' + name.toUpperCase().replaceAll('.', '_');
}

/** Layers defaults, file, environment and flags; validates every value once, up front. */
export function loadSettings(options: {
  flags?: Readonly<Record<string, string>>;
  env?: NodeJS.ProcessEnv;
  configFile?: string | undefined;
}): Settings {
  try {
    return readSettings(options);
  } catch (error) {
    // An operator's mistake, not a client's: its own code (docs/errors.md), the same message.
    if (isLightwellError(error) && error.code === 'bad_request')
      throw InvalidSetting(error.message, error.details, { cause: error });
    throw error;
  }
}

function readSettings(options: {
  flags?: Readonly<Record<string, string>>;
  env?: NodeJS.ProcessEnv;
  configFile?: string | undefined;
}): Settings {
  const raw = {} as Record<SettingName, string>;
  const sources = {} as Record<SettingName, SettingSource>;
  /** Where a value from the file or the environment came from, for its error message. */
  const origins = new Map<SettingName, string>();
  for (const [name, spec] of Object.entries(settingSpecs)) {
    raw[name as SettingName] = spec.fallback;
    sources[name as SettingName] = 'default';
  }
  if (options.configFile) {
    const fromFile = readConfigFile(options.configFile);
    for (const name of Object.keys(fromFile) as SettingName[]) {
      raw[name] = fromFile[name];
      sources[name] = 'file';
      origins.set(name, `config file ${options.configFile}`);
    }
  }
  const env = options.env ?? {};
  for (const name of Object.keys(settingSpecs) as SettingName[]) {
    const value = env[envName(name)];
    if (value === undefined || value === '') continue;
    raw[name] = value;
    sources[name] = 'env';
    origins.set(name, `environment variable ${envName(name)}`);
  }
  for (const [name, value] of Object.entries(options.flags ?? {})) {
    if (!isSettingName(name)) throw BadRequest(`unknown setting ${name}`);
    raw[name] = value;
    sources[name] = 'flag';
    origins.delete(name);
  }
  const settings = makeSettings(raw, sources);
  for (const name of Object.keys(settingSpecs) as SettingName[]) {
    try {
      validate(settings, name);
    } catch (error) {
      const origin = origins.get(name);
      if (origin === undefined || !isLightwellError(error)) throw error;
      throw BadRequest(`${error.message} (from ${origin})`, error.details, { cause: error });
    }
  }
  // Half a TLS setting would serve plain HTTP to an operator who believes it is HTTPS.
  if ((settings.string('tls.cert_file') === '') !== (settings.string('tls.key_file') === ''))
    throw BadRequest(
      'tls.cert_file and tls.key_file go together: set both to serve HTTPS, or neither',
    );
  return settings;
}

/** Whether a config file is read as TOML (by its extension), else JSON. */
export function isTomlFile(file: string): boolean {
  return extname(file).toLowerCase() === '.toml';
}

function readConfigFile(file: string): Record<SettingName, string> {
  const toml = isTomlFile(file);
  let parsed: unknown;
  try {
    const text = readFileSync(file, 'utf8');
    parsed = toml ? parseToml(text) : JSON.parse(text);
  } catch (cause) {
    // smol-toml's messages span lines (with the offending line quoted): the first one says it.
    const reason = ((cause as Error).message.split('\n')[0] ?? '').trim();
    throw BadRequest(`cannot read config file ${file}: ${reason}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw BadRequest(`config file must be a JSON object: ${file}`);
  const flat: Record<string, string> = {};
  flatten(parsed, '', flat);
  for (const name of Object.keys(flat)) {
    if (!isSettingName(name)) throw BadRequest(`unknown setting ${name} in ${file}`);
  }
  return flat;
}

function flatten(value: unknown, prefix: string, out: Record<string, string>): void {
  // A TOML date-time parses to a Date-like object: no setting takes one, and it would read
  // as an empty table.
  if (value instanceof Date)
    throw BadRequest(`${prefix}: a date is not a setting value; quote it as a string`);
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    for (const [key, inner] of Object.entries(value))
      flatten(inner, prefix ? `${prefix}.${key}` : key, out);
    return;
  }
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') {
    out[prefix] = String(value);
    return;
  }
  throw BadRequest(`${prefix}: expected a single value, got ${JSON.stringify(value)}`);
}

function makeSettings(
  raw: Record<SettingName, string>,
  sources: Record<SettingName, SettingSource>,
): Settings {
  // Values never change once loaded, and some are read per request (a token's lifetime, an
  // idempotency key's): each is parsed once, on first use.
  const parsed = new Map<SettingName, unknown>();
  const once =
    <T>(parse: (value: string, name: SettingName) => T) =>
    (name: SettingName): T => {
      if (parsed.has(name)) return parsed.get(name) as T;
      const value = parse(raw[name], name);
      parsed.set(name, value);
      return value;
    };
  return {
    raw,
    sources,
    string: (name) => raw[name],
    ratio: once(parseRatio),
    int: once((value, name) => parseIntStrict(name, value, settingSpecs[name])),
    bool: once((value, name) => parseBool(name, value)),
    duration: once(parseDuration),
    bytes: once(parseBytes),
    rate: once(parseRate),
    listen: once(parseListen),
  };
}

function validate(settings: Settings, name: SettingName): void {
  const kind: Kind = settingSpecs[name].kind;
  switch (kind) {
    case 'string':
      checkString(name, settings.string(name));
      return;
    case 'int':
      settings.int(name);
      return;
    case 'bool':
      settings.bool(name);
      return;
    case 'duration':
      settings.duration(name);
      return;
    case 'bytes':
      settings.bytes(name);
      return;
    case 'rate':
      settings.rate(name);
      return;
    case 'listen':
      settings.listen(name);
      return;
    case 'ratio':
      settings.ratio(name);
      return;
  }
}

/** A number from 0 to 1 (`0.5`, `.25`, `1`); anything else, `NaN` and `1e-1` included, is refused. */
export function parseRatio(value: string, name = 'ratio'): number {
  const text = value.trim();
  const number = Number(text);
  if (!/^(\d+(\.\d*)?|\.\d+)$/.test(text) || !(number >= 0 && number <= 1))
    throw BadRequest(`${name}: expected a number from 0 to 1, got ${JSON.stringify(value)}`);
  return number;
}

function checkString(name: SettingName, value: string): void {
  const spec: SettingSpec = settingSpecs[name];
  if (spec.nonEmpty === true && value === '') throw BadRequest(`${name} must not be empty`);
  if (spec.choices !== undefined && !spec.choices.includes(value)) {
    throw BadRequest(
      `${name}: expected one of ${spec.choices.join(', ')}, got ${JSON.stringify(value)}`,
    );
  }
}

function parseIntStrict(name: string, value: string, bounds: SettingSpec): number {
  if (!/^-?\d+$/.test(value))
    throw BadRequest(`${name}: expected an integer, got ${JSON.stringify(value)}`);
  const number = Number(value);
  const { min = -Infinity, max = Infinity } = bounds;
  if (number < min || number > max)
    throw BadRequest(`${name}: expected an integer from ${min} to ${max}, got ${value}`);
  return number;
}

function parseBool(name: string, value: string): boolean {
  if (/^(true|1|yes|on)$/i.test(value)) return true;
  if (/^(false|0|no|off)$/i.test(value)) return false;
  throw BadRequest(`${name}: expected true or false, got ${JSON.stringify(value)}`);
}

/** Nanoseconds in each unit of parseDuration: Go's, plus days and weeks. */
const durationUnitsNs: Record<string, bigint> = {
  ns: 1n,
  us: 1_000n,
  '\u00b5s': 1_000n,
  '\u03bcs': 1_000n,
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
  d: 86_400_000_000_000n,
  w: 604_800_000_000_000n,
};
/** Go's time.Duration counts nanoseconds in an int64: the longest duration it parses. */
const DURATION_NS_MAX = 2n ** 63n - 1n;
/** DURATION_NS_MAX as Go prints it. */
const DURATION_LONGEST = '2562047h47m16.854775807s';
/** Digits of a whole number that can fit under DURATION_NS_MAX (19), plus one. */
const DURATION_DIGITS_MAX = 20;
/** Fraction digits read: more change the sum by less than a nanosecond (Go drops them too). */
const DURATION_FRACTION_DIGITS_MAX = 18;

/**
 * Parses Go's duration syntax (`1h30m`, `1.5h`, `.5s`, `300ms`, `10us`, `0`, `+1h`), plus days
 * and weeks (`7d`, `2w`). Returns ms, rounded. As in Go, a duration past 2^63-1 ns (about 292
 * years) is refused; so is a negative one, which no caller has a use for.
 */
export function parseDuration(value: string, name = 'duration'): number {
  const text = value.trim().replace(/^\+/, '');
  if (text === '0') return 0;
  const pattern = /(?:(\d+)(?:\.(\d*))?|\.(\d+))(ns|us|\u00b5s|\u03bcs|ms|s|m|h|d|w)/gy;
  let totalNs = 0n;
  let matched = 0;
  for (const match of text.matchAll(pattern)) {
    const unitNs = durationUnitsNs[match[4] ?? ''] ?? 0n;
    const whole = (match[1] ?? '').replace(/^0+/, '').slice(0, DURATION_DIGITS_MAX);
    const fraction = (match[2] ?? match[3] ?? '').slice(0, DURATION_FRACTION_DIGITS_MAX);
    totalNs += BigInt(whole || '0') * unitNs;
    totalNs += (BigInt(fraction || '0') * unitNs) / 10n ** BigInt(fraction.length);
    matched += match[0].length;
    if (totalNs > DURATION_NS_MAX)
      throw BadRequest(
        `${name}: ${JSON.stringify(value)} is longer than the longest duration, ` +
          DURATION_LONGEST,
        { longest: DURATION_LONGEST },
      );
  }
  if (text.length === 0 || matched !== text.length) {
    throw BadRequest(
      `${name}: expected a duration such as 90s, 15m, 1h or 7d, got ${JSON.stringify(value)}`,
    );
  }
  return Number((totalNs + 500_000n) / 1_000_000n);
}

const byteUnits: Record<string, number> = {
  '': 1,
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  tib: 1024 ** 4,
};

export function parseBytes(value: string, name = 'size'): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(value);
  const unit = byteUnits[(match?.[2] ?? '').toLowerCase()];
  if (!match || unit === undefined)
    throw BadRequest(`${name}: expected a size such as 64MiB, got ${JSON.stringify(value)}`);
  return Math.floor(Number(match[1]) * unit);
}

/** Parses `10/s`, `10/s burst 20`, `600/m`. */
export function parseRate(value: string, name = 'rate'): Rate {
  const match = /^\s*(\d+(?:\.\d+)?)\s*\/\s*(s|m|h)(?:\s+burst\s+(\d+))?\s*$/i.exec(value);
  if (!match)
    throw BadRequest(
      `${name}: expected a rate such as 10/s burst 20, got ${JSON.stringify(value)}`,
    );
  const per = { s: 1, m: 60, h: 3600 }[(match[2] ?? 's').toLowerCase() as 's' | 'm' | 'h'];
  const perSecond = Number(match[1]) / per;
  const burst = match[3] === undefined ? Math.max(1, Math.ceil(perSecond)) : Number(match[3]);
  return { perSecond, burst };
}

export function parseListen(value: string, name = 'listen'): ListenAddress {
  const match = /^(\[[^\]]+\]|[^:]*):(\d{1,5})$/.exec(value.trim());
  const port = Number(match?.[2]);
  if (!match || port > 65535)
    throw BadRequest(`${name}: expected HOST:PORT, got ${JSON.stringify(value)}`);
  const host = (match[1] ?? '').replace(/^\[|\]$/g, '') || '0.0.0.0';
  return { host, port };
}
