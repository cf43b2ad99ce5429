// `npm run bench:peers` (node dist/bench/peers.js): Lightwell against peers on this machine.
// Each target (peer-targets.ts: Lightwell, s3rver, nginx's WebDAV PUT) is started alone on a
// fresh temp directory, measured and stopped before the next starts, so they never share the
// CPU. Every target runs the same four measurements of `npm run bench` (scenarios.ts) through
// the same load generator, with the same stamped incompressible bodies, every GET body checked
// by length and CRC32: 64 MiB objects over one stream (PUT, then GET them back; MB/s) and 4 KiB
// objects over 64 connections (PUT, then GET; ops/s). Only the paths differ (`ObjectApi`). A
// target with an S3 API (Lightwell, s3rver) also runs the S3 scenarios (s3-scenarios.ts: the
// same four through `@aws-sdk/client-s3`, signed with the target's key pair); one without
// (nginx) reports them skipped.
// Results go to peers.md and peers.json in --out (peer-report.ts).
//
// The targets do not do the same work: Lightwell answers a PUT after fdatasync, encrypts,
// checksums and indexes; the peers write to the page cache. The report says so beside the
// numbers. Exit 1 when a measurement does not complete with correct bytes or Lightwell does not
// start; a peer that cannot be installed or started is skipped. Speed is never asserted. Exit 2
// is a usage error.

import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { BenchError, errorMessage } from './bench-error.js';
import { findLightwellRoot, machineInfo } from './machine.js';
import {
  type PeerRun,
  type PeersReport,
  renderPeersMarkdown,
  writePeersReports,
} from './peer-report.js';
import {
  type Peer,
  PEER_NAMES,
  type PeerName,
  PEERS,
  type PeerSetup,
  type StartedPeer,
} from './peer-targets.js';
import { Progress } from './progress.js';
import { type ScenarioReport, scenarioReport } from './report.js';
import { closeS3Load, S3_SCENARIOS } from './s3-scenarios.js';
import { type S3Sdk, s3SdkOf } from './s3-load.js';
import { emptyMeasured } from './scenario-kit.js';
import type { LoadClient } from './load.js';
import {
  clientOf,
  defaultOutDir,
  installSignalHandlers,
  parseFlags,
  processOutput,
  profileOf,
  runAsMain,
  runCommand,
  type RunOutput,
  summaryLine,
} from './run.js';
import {
  newScenarioContext,
  type Profile,
  runScenarioSafely,
  type Scenario,
  type ScenarioContext,
  SCENARIO_SIZES,
  SCENARIOS,
} from './scenarios.js';

const USAGE = `Usage: npm run bench:peers -- [options]
       node dist/bench/peers.js [options]

  --quick                 small sizes, seconds per target (a smoke test)
  --only NAME,NAME        the targets to run: lightwell, s3rver, nginx (default: all three)
  --install               install a missing nginx (Debian's nginx-core) with apt-get, as root
  --out DIR               where peers.md and peers.json go, created if missing (default
                          ./lightwell-bench; --out docs/benchmarks for the committed ones)
  --data-parent DIR       where each target's temp directory goes (default: the OS temp dir);
                          use the disk production data would live on
  --port-base PORT        listen on PORT to PORT+3 (Lightwell's public and admin ports,
                          s3rver, nginx) instead of free ports found by the OS
  --lightwell-bin PATH    the lightwell CLI (default: ../bin/lightwell.js beside this file)
  --client node|native    the load generator (default native where \`npm run build\` compiled
                          it, else node), as for \`npm run bench\`
  --s3-sdk tuned|default  the AWS SDK's configuration in the S3 scenarios, as for
                          \`npm run bench\` (default tuned)

s3rver is installed from npm on first use into bench/.peers of the checkout (ignored by git).
`;

/** The scenarios of `npm run bench` that every target runs, in this order. */
export const PEER_MEASUREMENTS = [
  'put-64m-x1-random',
  'get-64m-x1-random',
  'put-4k-c64',
  'get-4k-c64',
  's3-put-64m-x1',
  's3-get-64m-x1',
  's3-put-4k-c64',
  's3-get-4k-c64',
] as const;

export interface PeersOptions {
  readonly profile: Profile;
  readonly only: readonly PeerName[];
  readonly install: boolean;
  readonly out: string;
  readonly dataParent: string;
  readonly portBase: number | null;
  readonly lightwellBin: string | undefined;
  readonly client: LoadClient;
  readonly s3Sdk: S3Sdk;
}

const ARG_OPTIONS = {
  quick: { type: 'boolean' },
  // `test`: tiny sizes for the harness's own tests.
  profile: { type: 'string' },
  only: { type: 'string' },
  install: { type: 'boolean' },
  out: { type: 'string' },
  'data-parent': { type: 'string' },
  'port-base': { type: 'string' },
  'lightwell-bin': { type: 'string' },
  client: { type: 'string' },
  's3-sdk': { type: 'string' },
  help: { type: 'boolean' },
} as const;

/** The highest --port-base: four ports from it must fit. */
const PORT_BASE_MAX = 65_535 - 3;

/** Parses argv; null means help was printed. Throws BenchError on a usage error. */
export function parsePeersOptions(
  argv: readonly string[],
  print: (text: string) => void,
): PeersOptions | null {
  const values = parseFlags(argv, ARG_OPTIONS);
  if (values.help === true) {
    print(USAGE);
    return null;
  }
  const only = values.only?.split(',').map((s) => s.trim()) ?? [...PEER_NAMES];
  const unknown = only.filter((name) => !(PEER_NAMES as readonly string[]).includes(name));
  if (unknown.length > 0 || only.length === 0) {
    throw new BenchError(`--only takes ${PEER_NAMES.join(', ')}; not ${unknown.join(', ')}`);
  }
  const portBase = values['port-base'] === undefined ? null : Number(values['port-base']);
  const portValid = Number.isSafeInteger(portBase) && Number(portBase) >= 1;
  if (portBase !== null && !(portValid && portBase <= PORT_BASE_MAX)) {
    throw new BenchError(`--port-base must be a port from 1 to ${PORT_BASE_MAX}`);
  }
  return {
    profile: profileOf(values),
    only: PEER_NAMES.filter((name) => only.includes(name)),
    install: values.install === true,
    out: resolve(values.out ?? defaultOutDir(process.cwd())),
    dataParent: resolve(values['data-parent'] ?? tmpdir()),
    portBase,
    lightwellBin: values['lightwell-bin'],
    client: clientOf(values.client),
    s3Sdk: s3SdkOf(values['s3-sdk']),
  };
}

/** The whole run; resolves with the exit code. */
export function runPeers(
  argv: readonly string[],
  output: RunOutput = processOutput,
): Promise<number> {
  return runCommand({ argv, output, usage: USAGE, parse: parsePeersOptions, execute });
}

function measurementScenarios(): Scenario[] {
  return PEER_MEASUREMENTS.map((name) => {
    const scenario = SCENARIOS.find((s) => s.name === name);
    assert.ok(scenario !== undefined, `scenario ${name} exists`);
    return scenario;
  });
}

async function execute(options: PeersOptions, output: RunOutput): Promise<number> {
  const progress = new Progress(output.err);
  const machine = machineInfo(options.dataParent);
  const scenarios = measurementScenarios();
  const setup: PeerSetup = {
    dataParent: options.dataParent,
    portBase: options.portBase,
    install: options.install,
    cacheDir: join(findLightwellRoot() ?? process.cwd(), 'bench', '.peers'),
    lightwellBin: options.lightwellBin,
    progress,
  };
  const targets: PeerRun[] = [];
  for (const peer of PEERS.filter((p) => options.only.includes(p.name))) {
    targets.push(await runTarget(peer, setup, scenarios, options));
  }
  const sizes = SCENARIO_SIZES[options.profile];
  const report: PeersReport = {
    formatVersion: 1,
    generatedAt: new Date().toISOString(),
    machine,
    settings: {
      profile: options.profile,
      targets: options.only.join(' '),
      portBase: options.portBase,
      install: options.install,
      client: options.client,
      s3Sdk: options.s3Sdk,
    },
    sizes: {
      largeBytes: sizes.largeBytes,
      largeCount: sizes.largeCountSingle,
      smallBytes: sizes.smallBytes,
      smallPuts: sizes.smallPuts,
      smallGets: sizes.smallGets,
    },
    measurements: scenarios.map(({ name, title }) => ({ name, title })),
    targets,
    ok: targets.every((target) => target.status !== 'failed'),
  };
  const files = writePeersReports(options.out, report);
  output.out(`${renderPeersMarkdown(report)}\nWrote ${files.join(', ')}\n`);
  if (!report.ok) output.err.write('peer benchmark FAILED: see the Failures section above\n');
  return report.ok ? 0 : 1;
}

function isS3Scenario(scenario: Scenario): boolean {
  return S3_SCENARIOS.some((s3) => s3.name === scenario.name);
}

/** Starts one target, runs every measurement on it, stops it. */
async function runTarget(
  peer: Peer,
  setup: PeerSetup,
  scenarios: readonly Scenario[],
  options: PeersOptions,
): Promise<PeerRun> {
  const { progress } = setup;
  const base = { name: peer.name, title: peer.title, facts: peer.facts };
  progress.note(`${peer.name}: starting`);
  let started: StartedPeer;
  try {
    started = await peer.start(setup);
  } catch (error) {
    // Lightwell is what is measured: it must start. A peer that cannot is only missing.
    const status = peer.name === 'lightwell' ? 'failed' : 'skipped';
    const reason = errorMessage(error);
    progress.note(`${peer.name}: ${status}: ${reason}`);
    return { ...base, version: null, status, reason, measurements: [] };
  }
  const { service, api, version } = started;
  const removeHandlers = installSignalHandlers(service, progress);
  let contextOf: ScenarioContext | undefined;
  try {
    const sizes = SCENARIO_SIZES[options.profile];
    const client = options.client;
    const s3Sdk = options.s3Sdk;
    const context = newScenarioContext({ service, sizes, progress, api, client, s3Sdk });
    contextOf = context;
    const measurements: ScenarioReport[] = [];
    for (const scenario of scenarios) {
      const measured =
        isS3Scenario(scenario) && !service.credentials
          ? emptyMeasured({ skipped: 'no S3 API' })
          : await runScenarioSafely(scenario, context);
      const report = scenarioReport(scenario, measured, []);
      progress.note(`${peer.name} ${summaryLine(report)}`);
      measurements.push(report);
    }
    const failed = measurements.some((m) => m.status === 'failed');
    return { ...base, version, status: failed ? 'failed' : 'ok', measurements };
  } finally {
    if (contextOf) await closeS3Load(contextOf);
    removeHandlers();
    await service.stop();
  }
}

runAsMain(import.meta.url, (argv) => runPeers(argv));
