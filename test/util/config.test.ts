// Goal: the settings loader layers defaults, file, environment and flags in that order and
// refuses malformed or unknown values with a clear message, and half a TLS setting.
import t from 'tap';
import { pino } from 'pino';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import {
  loadSettings,
  parseDuration,
  parseBytes,
  parseRate,
  parseListen,
  envName,
  LOG_LEVELS,
} from '../../src/util/config.js';

t.test('defaults match DECISIONS.md', async (t) => {
  const s = loadSettings({});
  t.equal(s.string('data_dir'), './data');
  t.same(s.listen('public_listen'), { host: '0.0.0.0', port: 9000 });
  t.same(s.listen('admin_listen'), { host: '127.0.0.1', port: 9001 });
  t.equal(s.duration('security.native_api_token_ttl'), 3_600_000);
  t.equal(s.duration('security.max_presign_ttl'), 7 * 86_400_000);
  t.same(s.rate('security.token_mint_rate'), { perSecond: 10, burst: 20 });
  t.same(s.rate('admin.rate_limit'), { perSecond: 50, burst: 100 });
  t.equal(s.bool('notifications.allow_private_targets'), false);
});

t.test('file, then environment, then flags', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'lw-config-'));
  const file = join(dir, 'c.json');
  writeFileSync(
    file,
    JSON.stringify({
      security: { native_api_token_ttl: '2h', max_presign_ttl: '1d' },
      'log.level': 'warn',
    }),
  );
  const env = { [envName('security.max_presign_ttl')]: '3h', [envName('log.level')]: 'debug' };
  const s = loadSettings({ configFile: file, env, flags: { 'log.level': 'error' } });
  t.equal(s.duration('security.native_api_token_ttl'), 7_200_000, 'file value');
  t.equal(s.duration('security.max_presign_ttl'), 10_800_000, 'env beats file');
  t.equal(s.string('log.level'), 'error', 'flag beats env');
  t.equal(envName('security.native_api_token_ttl'), 'LIGHTWELL_SECURITY_NATIVE_API_TOKEN_TTL');
});

t.test('bad values are refused', async (t) => {
  t.throws(() => loadSettings({ flags: { 'nope.setting': '1' } }), { code: 'invalid_setting' });
  t.throws(() => loadSettings({ env: { LIGHTWELL_GATEWAYS: 'two' } }), { code: 'invalid_setting' });
  t.throws(() => parseDuration('10 parsecs'), { code: 'bad_request' });
  t.throws(() => parseDuration(''), { code: 'bad_request' });
  t.throws(() => parseListen('localhost'), { code: 'bad_request' });
  t.throws(() => parseListen('h:70000'), { code: 'bad_request' });
});

t.test('an empty data directory is refused: it would mean the current directory', async (t) => {
  const file = join(mkdtempSync(join(tmpdir(), 'lw-config-')), 'c.json');
  writeFileSync(file, JSON.stringify({ data_dir: '' }));
  const empty = { code: 'invalid_setting', message: /^data_dir must not be empty/ };
  t.throws(() => loadSettings({ flags: { data_dir: '' } }), empty, 'from a flag');
  t.throws(() => loadSettings({ configFile: file }), empty, 'from the config file');
  // An empty environment variable is unset (LIGHTWELL_DATA_DIR= keeps the default).
  t.equal(loadSettings({ env: { LIGHTWELL_DATA_DIR: '' } }).string('data_dir'), './data');
});

t.test(
  'a TLS certificate without its key, or a key without its certificate, is refused',
  async (t) => {
    const half = {
      code: 'invalid_setting',
      message: /^tls\.cert_file and tls\.key_file go together/,
    };
    t.throws(() => loadSettings({ flags: { 'tls.cert_file': '/etc/c.pem' } }), half, 'cert alone');
    t.throws(
      () => loadSettings({ env: { LIGHTWELL_TLS_KEY_FILE: '/etc/k.pem' } }),
      half,
      'key alone',
    );
    const both = loadSettings({ flags: { 'tls.cert_file': '/c.pem', 'tls.key_file': '/k.pem' } });
    t.equal(both.string('tls.key_file'), '/k.pem', 'both together load');
    t.equal(loadSettings({}).string('tls.cert_file'), '', 'neither: plain HTTP');
  },
);

t.test('log.level is one of pino levels', async (t) => {
  t.same([...LOG_LEVELS].sort(), [...Object.keys(pino.levels.values), 'silent'].sort());
  for (const level of LOG_LEVELS)
    t.equal(loadSettings({ flags: { 'log.level': level } }).string('log.level'), level);
  t.throws(() => loadSettings({ flags: { 'log.level': 'verbose' } }), {
    code: 'invalid_setting',
    message:
      'log.level: expected one of fatal, error, warn, info, debug, trace, silent, got "verbose"',
  });
});

t.test('a bad value names where it came from', async (t) => {
  t.throws(() => loadSettings({ env: { LIGHTWELL_GATEWAYS: 'abc' } }), {
    message:
      'gateways: expected an integer, got "abc" (from environment variable LIGHTWELL_GATEWAYS)',
  });
  const dir = mkdtempSync(join(tmpdir(), 'lw-config-'));
  const file = join(dir, 'c.json');
  writeFileSync(file, JSON.stringify({ log: { level: 'loud' } }));
  t.throws(() => loadSettings({ configFile: file }), {
    message: new RegExp(
      `^log\\.level: expected one of .*, got "loud" \\(from config file ${file}\\)$`,
    ),
  });
  // A flag overrides the bad value, which is then never read.
  t.equal(
    loadSettings({ configFile: file, flags: { 'log.level': 'warn' } }).string('log.level'),
    'warn',
  );
  t.throws(() => loadSettings({ flags: { gateways: 'abc' } }), {
    message: 'gateways: expected an integer, got "abc"',
  });
  for (const text of ['[]', '"x"', '3', 'null']) {
    writeFileSync(file, text);
    t.throws(
      () => loadSettings({ configFile: file }),
      { message: `config file must be a JSON object: ${file}` },
      `a config file holding ${text}`,
    );
  }
});

t.test('parsers', async (t) => {
  t.equal(parseDuration('1h30m'), 5_400_000);
  t.equal(parseDuration('500ms'), 500);
  // Go's syntax (time.ParseDuration), which GET /audit?since= takes, plus days and weeks.
  for (const [text, ms] of [
    ['0', 0],
    ['1.5h', 5_400_000],
    ['.5s', 500],
    ['1.s', 1000],
    ['2h45m30.5s', 9_930_500],
    ['1500us', 2],
    ['1500\u00b5s', 2],
    ['1500\u03bcs', 2],
    ['2000000ns', 2],
    ['7d', 604_800_000],
    // Go takes a leading sign; plus is the duration itself.
    ['+1h', 3_600_000],
    ['+0', 0],
    ['+1.5s', 1500],
    // Go's longest duration, 2^63-1 ns, and the longest whole weeks under it.
    ['2562047h47m16.854775807s', 9_223_372_036_855],
    ['15250w', 15250 * 604_800_000],
    ['000000000000000000000000001h', 3_600_000],
  ] as const)
    t.equal(parseDuration(text), ms, text);
  // A negative duration is refused, as is one Go refuses as out of its int64 nanoseconds.
  for (const text of ['-1h', '-0', '+', '++1h', '+-1h', '1', '1H', 'h', '1h 30m', '.s', '1.5'])
    t.throws(() => parseDuration(text), { code: 'bad_request' }, text);
  for (const text of ['2562047h47m16.854775808s', '9999999999h', '15251w', `1${'0'.repeat(500)}s`])
    t.throws(
      () => parseDuration(text),
      { code: 'bad_request', message: /longer than the longest duration/ },
      text,
    );
  t.equal(parseBytes('64MiB'), 64 * 1024 * 1024);
  t.equal(parseBytes('5TiB'), 5 * 1024 ** 4);
  t.same(parseRate('600/m'), { perSecond: 10, burst: 10 });
  t.same(parseListen('[::1]:80'), { host: '::1', port: 80 });
  t.same(parseListen(':80'), { host: '0.0.0.0', port: 80 });
});

t.test(
  'a TOML config file, with comments, tables and dotted keys, chosen by extension',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'lw-config-'));
    const file = join(dir, 'lightwell.toml');
    writeFileSync(
      file,
      [
        '# the settings of this node',
        'data_dir = "/srv/lightwell"',
        'gateways = 2 # a number, not a string',
        '"log.level" = "warn"',
        '[storage]',
        'compaction_live_ratio = 0.25',
        'direct_io = false',
        '[security]',
        'native_api_token_ttl = "2h"',
        '',
      ].join('\n'),
    );
    const s = loadSettings({ configFile: file, flags: { workers: '3' } });
    t.equal(s.string('data_dir'), '/srv/lightwell');
    t.equal(s.int('gateways'), 2);
    t.equal(s.string('log.level'), 'warn');
    t.equal(s.ratio('storage.compaction_live_ratio'), 0.25);
    t.equal(s.bool('storage.direct_io'), false);
    t.equal(s.duration('security.native_api_token_ttl'), 7_200_000);
    t.equal(s.sources['data_dir'], 'file');
    t.equal(s.sources['workers'], 'flag');
    t.equal(s.sources['admin_listen'], 'default');
    t.equal(loadSettings({ env: { LIGHTWELL_WORKERS: '2' } }).sources['workers'], 'env');

    // A JSON file with a comment is not JSON: the extension decides, and the file is named.
    const json = join(dir, 'lightwell.json');
    writeFileSync(json, '# comment\n{"gateways": 2}\n');
    t.throws(() => loadSettings({ configFile: json }), {
      code: 'invalid_setting',
      message: new RegExp(`^cannot read config file ${json}: `),
    });
    const bad = join(dir, 'bad.toml');
    for (const [text, message] of [
      ['gateways = ', /^cannot read config file .*bad\.toml: \S/],
      ['[storage]\ncompaction_live_ratio = "banana"', /compaction_live_ratio.*from config file/],
      ['nope = 1', /^unknown setting nope in /],
      ['workers = [1, 2]', /^workers: expected a single value/],
      ['data_dir = 1979-05-27T07:32:00Z', /^data_dir: a date is not a setting value/],
    ] as const) {
      writeFileSync(bad, text);
      t.throws(() => loadSettings({ configFile: bad }), { code: 'invalid_setting', message }, text);
    }
  },
);

t.test('a ratio is a number from 0 to 1', async (t) => {
  for (const good of ['0', '1', '0.5', '.25', '1.0'])
    t.ok(loadSettings({ flags: { 'storage.compaction_live_ratio': good } }), good);
  for (const bad of ['banana', '', '1.5', '-0.1', 'NaN', '1e-1', '0x1', ' '])
    t.throws(
      () => loadSettings({ flags: { 'storage.compaction_live_ratio': bad } }),
      {
        code: 'invalid_setting',
        message: /^storage\.compaction_live_ratio: expected a number from 0 to 1/,
      },
      JSON.stringify(bad),
    );
  t.equal(loadSettings({}).ratio('storage.compaction_live_ratio'), 0.5);
});

t.test('the drain grace and the access log have defaults', async (t) => {
  const s = loadSettings({});
  t.equal(s.duration('shutdown.grace'), 30_000);
  t.equal(s.bool('log.access'), false);
});

t.test('log.format: auto, json or pretty', async (t) => {
  t.equal(loadSettings({}).string('log.format'), 'auto');
  t.equal(loadSettings({ flags: { 'log.format': 'pretty' } }).string('log.format'), 'pretty');
  t.throws(() => loadSettings({ flags: { 'log.format': 'xml' } }), { code: 'invalid_setting' });
});
