// `npm run bench` (node dist/bench/run.js) and `lightwell bench`: measures this machine's
// limits, then Lightwell through its public port, and writes results.md, results.json and
// chart.svg to --out, ./lightwell-bench by default, created when missing. The committed results
// in a checkout's docs/benchmarks change only when asked for (`--out docs/benchmarks`): a quick
// run there had overwritten them.
//
// Without --endpoint it starts Lightwell (dist/bin/lightwell.js beside this file) on a fresh
// temp data directory; with --endpoint it drives a running service. --quick shrinks every
// scenario so the whole run takes well under a minute: it is CI's smoke test, and it, like the
// full run, fails (exit 1) only when a scenario does not complete with correct bytes or a limit
// cannot be measured. Speed is never asserted. Exit 2 is a usage error.
//
// `runBench(argv)` is exported for `lightwell bench` (bin/lightwell.ts), which imports this
// module only when that command runs. Both commands go through `runBenchAsService`, which first
// starts the benchmark again under the allocator settings of Lightwell's own processes.

import { spawn } from 'node:child_process';
import { realpathSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { CHILD_MALLOC_ENV } from '../src/util/malloc-env.js';
import { BenchError, errorMessage } from './bench-error.js';
import { deriveLimits, LIMIT_BUDGETS, type Limit, measureLimits } from './limits.js';
import type { LoadClient } from './load.js';
import { machineInfo, type MachineInfo } from './machine.js';
import { NATIVE_LOADGEN_PATH, nativeLoadAvailable } from './native-load.js';
import { formatBytes, Progress, type ProgressStream } from './progress.js';
import {
  type BenchReport,
  renderMarkdown,
  type ScenarioReport,
  scenarioReport,
  writeReports,
} from './report.js';
import {
  emptyMeasured,
  LIGHTWELL_API,
  newScenarioContext,
  type Profile,
  runScenarioSafely,
  type Scenario,
  SCENARIO_SIZES,
  SCENARIOS,
  writtenBytesEstimate,
} from './scenarios.js';
import { openService, type Service, type ServiceOptions } from './service.js';
import { withNativeRatio } from './s3-scenarios.js';
import { type S3Sdk, s3SdkOf } from './s3-load.js';

const USAGE = `Usage: lightwell bench [options]
       npm run bench -- [options]     (in a Lightwell checkout: builds, then the same)

  --quick                 small sizes, under a minute (CI smoke test)
  --only NAME,NAME        run only these scenarios (see --list)
  --list                  print the scenario names and exit
  --out DIR               where results go, created if missing (default ./lightwell-bench;
                          --out docs/benchmarks regenerates a checkout's committed results)
  --skip-limits           do not measure the machine's limits (no ratios)
  --limits-only           measure the machine's limits, run no scenario
  --client node|native    the load generator of the scenarios and the HTTP limits (default
                          native where \`npm run build\` compiled it, else node); a load the
                          native one cannot run (TLS, a listing) runs on node either way
  --s3-sdk tuned|default  the AWS SDK's configuration in the S3 scenarios: the bench's
                          (default: checksums WHEN_REQUIRED, one attempt, cached middleware)
                          or the SDK's own (CRC32 on every PUT and GET, three attempts)

  Lightwell started by the benchmark (default):
  --lightwell-bin PATH    the lightwell CLI (default: ../bin/lightwell.js beside this file)
  --data-parent DIR       where the temp data directory goes (default: the OS temp dir);
                          use the disk production data would live on
  --keep-data             keep the data directory and serve.log afterwards
  --log-level LEVEL       the service's log level (LIGHTWELL_LOG_LEVEL)
  --gateways N            gateway processes sharing the public port, 1 to 64 (default: as serve)

  A running Lightwell:
  --endpoint URL          public listener, e.g. http://10.0.0.5:9000
  --token TOKEN           a bearer token (lwtk_…), or:
  --access-key ID --secret-key SECRET    an access key to mint tokens with, or:
  --admin-url URL --admin-token TOKEN    admin API to create tenant "bench" and a key
  --server-pid PID        the serve process, if local: enables server CPU and RSS columns
  --insecure              accept any TLS certificate (https endpoints)
`;

export interface RunOptions {
  readonly profile: Profile;
  readonly only: readonly string[] | null;
  readonly out: string;
  readonly skipLimits: boolean;
  readonly limitsOnly: boolean;
  readonly client: LoadClient;
  readonly s3Sdk: S3Sdk;
  readonly service: ServiceOptions;
}

const ARG_OPTIONS = {
  quick: { type: 'boolean' },
  profile: { type: 'string' },
  only: { type: 'string' },
  list: { type: 'boolean' },
  out: { type: 'string' },
  'skip-limits': { type: 'boolean' },
  'limits-only': { type: 'boolean' },
  client: { type: 'string' },
  's3-sdk': { type: 'string' },
  'lightwell-bin': { type: 'string' },
  'data-parent': { type: 'string' },
  'keep-data': { type: 'boolean' },
  'log-level': { type: 'string' },
  gateways: { type: 'string' },
  endpoint: { type: 'string' },
  token: { type: 'string' },
  'access-key': { type: 'string' },
  'secret-key': { type: 'string' },
  'admin-url': { type: 'string' },
  'admin-token': { type: 'string' },
  'server-pid': { type: 'string' },
  insecure: { type: 'boolean' },
  help: { type: 'boolean' },
} as const;

/** Parses argv; null means help or --list was printed. Throws BenchError on a usage error. */
export function parseRunOptions(
  argv: readonly string[],
  print: (text: string) => void,
): RunOptions | null {
  const values = parseFlags(argv, ARG_OPTIONS);
  if (values.help === true) {
    print(USAGE);
    return null;
  }
  if (values.list === true) {
    print(SCENARIOS.map((s) => `${s.name.padEnd(20)} ${s.title}`).join('\n') + '\n');
    return null;
  }
  const profile = profileOf(values);
  const only =
    values.only
      ?.split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '') ?? null;
  const unknown = (only ?? []).filter((name) => !SCENARIOS.some((s) => s.name === name));
  if (unknown.length > 0) {
    throw new BenchError(`unknown scenario ${unknown.join(', ')}; --list shows them`);
  }
  const gateways = values.gateways === undefined ? undefined : Number(values.gateways);
  if (
    gateways !== undefined &&
    !(Number.isSafeInteger(gateways) && gateways >= 1 && gateways <= 64)
  ) {
    throw new BenchError('--gateways must be a whole number from 1 to 64 (as for serve)');
  }
  if (gateways !== undefined && values.endpoint !== undefined) {
    throw new BenchError('--gateways applies to a service the benchmark starts, not --endpoint');
  }
  const pid = values['server-pid'] === undefined ? undefined : Number(values['server-pid']);
  if (pid !== undefined && !Number.isSafeInteger(pid)) {
    throw new BenchError('--server-pid must be a number');
  }
  return {
    profile,
    only,
    out: resolve(values.out ?? defaultOutDir(process.cwd())),
    skipLimits: values['skip-limits'] === true,
    limitsOnly: values['limits-only'] === true,
    client: clientOf(values.client),
    s3Sdk: s3SdkOf(values['s3-sdk']),
    service: {
      endpoint: values.endpoint,
      token: values.token,
      accessKey: values['access-key'],
      secretKey: values['secret-key'],
      adminUrl: values['admin-url'],
      adminToken: values['admin-token'],
      serverPid: pid,
      lightwellBin: values['lightwell-bin'],
      dataParent: values['data-parent'],
      keepData: values['keep-data'] === true,
      logLevel: values['log-level'],
      gateways,
      insecure: values.insecure === true,
    },
  };
}

type FlagOptions = NonNullable<ParseArgsConfig['options']>;
type Flags<O extends FlagOptions> = ReturnType<
  typeof parseArgs<{ args: string[]; options: O; strict: true; allowPositionals: false }>
>['values'];

/** Flags as node:util's parseArgs reads them: strict, no positionals. Throws on a usage error. */
export function parseFlags<O extends FlagOptions>(argv: readonly string[], options: O): Flags<O> {
  return parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }).values;
}

/** --profile (`test`: tiny sizes for the harness's tests), else quick with --quick, else full. */
export function profileOf(values: {
  readonly profile?: string | undefined;
  readonly quick?: boolean | undefined;
}): Profile {
  const profile = values.profile ?? (values.quick === true ? 'quick' : 'full');
  if (!(profile in SCENARIO_SIZES)) throw new BenchError('--profile must be full, quick or test');
  return profile as Profile;
}

/** --client: native where it was built, unless node is asked for. Throws on a usage error. */
export function clientOf(value: string | undefined): LoadClient {
  if (value !== undefined && value !== 'node' && value !== 'native') {
    throw new BenchError('--client must be node or native');
  }
  if (value === 'node') return 'node';
  if (nativeLoadAvailable()) return 'native';
  if (value === 'native') {
    throw new BenchError(
      `--client native: the native load generator is not built (${NATIVE_LOADGEN_PATH}); ` +
        '`npm run build` builds it with a C compiler on Linux',
    );
  }
  return 'node';
}

/**
 * ./lightwell-bench, in a Lightwell checkout too: the committed results (docs/benchmarks) are
 * written only when `--out` names them, never by a run that did not ask. Relative to `cwd`.
 */
export function defaultOutDir(cwd: string): string {
  return join(cwd, 'lightwell-bench');
}

/** Where a run writes: results to `out`, progress and errors to `err`. */
export interface RunOutput {
  out(text: string): void;
  readonly err: ProgressStream;
}

export const processOutput: RunOutput = {
  out: (text) => process.stdout.write(text),
  err: process.stderr,
};

/** The whole run; resolves with the exit code. */
export function runBench(
  argv: readonly string[],
  output: RunOutput = processOutput,
): Promise<number> {
  return runCommand({ argv, output, usage: USAGE, parse: parseRunOptions, execute });
}

/** A bench command: flags parsed, then run. A usage error prints the usage and answers 2. */
export async function runCommand<Options>(command: {
  readonly argv: readonly string[];
  readonly output: RunOutput;
  readonly usage: string;
  /** Null when help was printed; throws on a usage error. */
  parse(argv: readonly string[], print: (text: string) => void): Options | null;
  execute(options: Options, output: RunOutput): Promise<number>;
}): Promise<number> {
  const { output } = command;
  let options: Options | null;
  try {
    options = command.parse(command.argv, (text) => output.out(text));
  } catch (error) {
    output.err.write(`${errorMessage(error)}\n\n${command.usage}`);
    return 2;
  }
  return options === null ? 0 : command.execute(options, output);
}

async function execute(options: RunOptions, output: RunOutput): Promise<number> {
  const progress = new Progress(output.err);
  const dataParent = options.service.dataParent ?? tmpdir();
  const machine = machineInfo(dataParent);
  const scenarios = SCENARIOS.filter((s) => options.only?.includes(s.name) ?? true);
  const measured = options.skipLimits
    ? { limits: [], failures: [] }
    : await measureAllLimits(options, progress, dataParent, machine);
  if (!options.limitsOnly && options.service.endpoint === undefined) {
    warnAboutDataDisk(options, machine, progress);
  }
  const scenarioReports = options.limitsOnly
    ? []
    : await runScenarios(options, scenarios, measured.limits, progress);
  const report: BenchReport = {
    formatVersion: 1,
    generatedAt: new Date().toISOString(),
    machine,
    settings: settingsOf(options, scenarios),
    sizes: { ...SCENARIO_SIZES[options.profile] },
    limits: measured.limits,
    limitFailures: measured.failures,
    scenarios: scenarioReports,
    ok: measured.failures.length === 0 && scenarioReports.every((s) => s.status !== 'failed'),
  };
  const files = writeReports(options.out, report);
  output.out(`${renderMarkdown(report)}\nWrote ${files.join(', ')}\n`);
  if (!report.ok) output.err.write('benchmark FAILED: see the Failures section above\n');
  return report.ok ? 0 : 1;
}

interface MeasuredLimits {
  readonly limits: Limit[];
  readonly failures: string[];
}

async function measureAllLimits(
  options: RunOptions,
  progress: Progress,
  dataParent: string,
  machine: MachineInfo,
): Promise<MeasuredLimits> {
  progress.note(`measuring this machine's limits (${options.profile} budget)`);
  const result = await measureLimits({
    budget: LIMIT_BUDGETS[options.profile],
    tmpParent: dataParent,
    client: options.client,
    onLimit: (limit, index, total) => {
      const value = limit.value.toFixed(limit.value >= 100 ? 0 : 2);
      progress.note(`  [${index + 1}/${total}] ${limit.name}: ${value} ${limit.unit}`);
    },
  });
  for (const failure of result.failures) progress.note(`  limit failed: ${failure}`);
  const derived = deriveLimits(result.limits, machine.cores);
  return { limits: [...result.limits, ...derived], failures: result.failures };
}

/** A tmpfs makes fdatasync free and fills RAM; a small disk fails scenarios midway. */
function warnAboutDataDisk(options: RunOptions, machine: MachineInfo, progress: Progress): void {
  const { path, type } = machine.filesystem;
  if (type === 'tmpfs' || type === 'ramfs') {
    progress.note(
      `warning: ${path} is on ${type}: writes are not durable and use RAM; ` +
        'pass --data-parent DIR on the disk that production data would use',
    );
  }
  const needed = writtenBytesEstimate(SCENARIO_SIZES[options.profile]);
  try {
    const stats = statfsSync(path);
    const free = stats.bavail * stats.bsize;
    if (free < needed * 1.2) {
      progress.note(
        `warning: ${formatBytes(free)} free in ${path}, a full pass may write up to ` +
          `${formatBytes(needed)}; pass --data-parent DIR or --only`,
      );
    }
  } catch {
    // No statfs here: nothing to check.
  }
}

type Settings = Record<string, string | number | boolean | null>;

function settingsOf(options: RunOptions, scenarios: readonly Scenario[]): Settings {
  const settings: Settings = {
    profile: options.profile,
    mode: options.service.endpoint === undefined ? 'started' : 'endpoint',
    endpoint: options.service.endpoint ?? null,
    scenarios:
      scenarios.length === SCENARIOS.length ? 'all' : scenarios.map((s) => s.name).join(' '),
    logLevel: options.service.logLevel ?? 'default',
    client: options.client,
    s3Sdk: options.s3Sdk,
    // serve's own setting when the flag is absent: LIGHTWELL_GATEWAYS, else one.
    gateways:
      options.service.endpoint === undefined
        ? (options.service.gateways ?? Number(process.env['LIGHTWELL_GATEWAYS'] ?? 1))
        : null,
  };
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.startsWith('LIGHTWELL_') || /SECRET|TOKEN|PASSWORD/.test(name)) continue;
    settings[name] = value ?? '';
  }
  return settings;
}

async function runScenarios(
  options: RunOptions,
  scenarios: readonly Scenario[],
  limits: readonly Limit[],
  progress: Progress,
): Promise<ScenarioReport[]> {
  let service: Service;
  try {
    const endpoint = options.service.endpoint;
    progress.note(endpoint === undefined ? 'starting Lightwell' : `connecting to ${endpoint}`);
    service = await openService(options.service);
  } catch (error) {
    const reason = `service unavailable: ${errorMessage(error)}`;
    progress.note(reason);
    return scenarios.map((s) => scenarioReport(s, emptyMeasured({ failures: [reason] }), []));
  }
  const removeHandlers = installSignalHandlers(service, progress);
  try {
    const context = newScenarioContext({
      service,
      sizes: SCENARIO_SIZES[options.profile],
      progress,
      api: LIGHTWELL_API,
      client: options.client,
      s3Sdk: options.s3Sdk,
    });
    const reports: ScenarioReport[] = [];
    for (const scenario of scenarios) {
      const measured = await runScenarioSafely(scenario, context);
      const report = withNativeRatio(scenario, scenarioReport(scenario, measured, limits), reports);
      progress.note(summaryLine(report));
      reports.push(report);
    }
    return reports;
  } finally {
    removeHandlers();
    await service.stop();
  }
}

/** One line of stderr for a finished scenario. */
export function summaryLine(report: ScenarioReport): string {
  if (report.status === 'skipped') return `${report.name}: skipped (${report.reason ?? ''})`;
  if (report.status === 'failed') return `${report.name}: FAILED: ${report.failures.join('; ')}`;
  const primary = report.ratios[0];
  const ratio = primary ? `, ${primary.value.toFixed(2)} of ${primary.limit}` : '';
  const { value, unit } = report.throughput;
  return (
    `${report.name}: ${value.toFixed(value >= 100 ? 0 : 1)} ${unit}, ` +
    `p50 ${report.latencyMsP50.toFixed(1)} ms, p99 ${report.latencyMsP99.toFixed(1)} ms${ratio}`
  );
}

/** On SIGINT/SIGTERM: stop the service we started, then die of the same signal. */
export function installSignalHandlers(service: Service, progress: Progress): () => void {
  const handler = (signal: NodeJS.Signals): void => {
    remove();
    service.kill();
    const dataDir = service.dataDir;
    const kept = dataDir === null ? '' : `; its data is kept in ${dirname(dataDir)}`;
    progress.note(`\n${signal}: stopped the benchmark${kept}`);
    process.kill(process.pid, signal);
  };
  const remove = (): void => {
    process.off('SIGINT', handler);
    process.off('SIGTERM', handler);
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  return remove;
}

/**
 * Runs the benchmark under the glibc allocator settings that `lightwell serve` gives its
 * children (`CHILD_MALLOC_ENV`), so the machine's limits are measured as the service's stages
 * run: without them each 1 MiB AES-GCM output is a fresh mmap, and the limit read 1.34 GB/s
 * against 2.39 with them. glibc reads the settings when a process starts, so when they are
 * missing the same command line (`relaunch`, node's arguments) is started again with them, and
 * its exit code is answered.
 */
export async function runBenchAsService(
  argv: string[],
  relaunch: readonly string[] = [...process.execArgv, ...process.argv.slice(1)],
): Promise<number> {
  const missing = Object.keys(CHILD_MALLOC_ENV).some((name) => process.env[name] === undefined);
  if (!missing) return runBench(argv);
  const child = spawn(process.execPath, relaunch, {
    stdio: 'inherit',
    env: { ...CHILD_MALLOC_ENV, ...process.env },
  });
  // The child stops the service it started and dies of the signal. A terminal's Ctrl-C reaches
  // it directly (same process group), so SIGINT is only kept from ending this process first;
  // SIGTERM and SIGHUP, sent to this process alone, are passed on.
  const ignore = (): void => undefined;
  const forward = (signal: NodeJS.Signals): void => {
    child.kill(signal);
  };
  process.on('SIGINT', ignore);
  process.on('SIGTERM', forward);
  process.on('SIGHUP', forward);
  let ended: { code: number | null; signal: NodeJS.Signals | null };
  try {
    ended = await new Promise((resolvePromise, reject) => {
      child.once('error', reject);
      child.once('exit', (code, signal) => {
        resolvePromise({ code, signal });
      });
    });
  } finally {
    process.off('SIGINT', ignore);
    process.off('SIGTERM', forward);
    process.off('SIGHUP', forward);
  }
  // Die as the child did, so a caller sees the signal rather than an exit code.
  if (ended.signal !== null) process.kill(process.pid, ended.signal);
  return ended.code ?? 1;
}

/**
 * Runs `main` with the command line's arguments when `moduleUrl` (the caller's
 * `import.meta.url`) is the script that node started; its answer is the exit code.
 */
export function runAsMain(moduleUrl: string, main: (argv: string[]) => Promise<number>): void {
  const script = process.argv[1];
  if (script === undefined) return;
  try {
    if (moduleUrl !== pathToFileURL(realpathSync(script)).href) return;
  } catch {
    return;
  }
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
      process.stderr.write(`${text}\n`);
      process.exitCode = 1;
    },
  );
}

runAsMain(import.meta.url, (argv) => runBenchAsService(argv));
