// Loaded into every test process before the test file (package.json, tap's `node-arg`): when the
// run collects no coverage (the default, docs/testing.md), the processes a test starts (engines,
// gateways, whole cluster nodes, CLI runs) start without tap's process-info hook.
//
// Why: tap puts its process-info hook (`--import …/@tapjs/processinfo/…`) into NODE_OPTIONS of
// every process a test spawns, and re-adds it on every spawn (through process-on-spawn). The hook
// runs a module loader on a thread of its own in each process and passes every module it loads
// through it: a Lightwell node (supervisor, engine, gateway, admin) then spends about a third more
// CPU than without it, and the hook is only needed to map coverage and `tap --changed` onto those
// processes. With coverage on (`npm run test:coverage`) nothing changes.
//
// How: process-on-spawn keeps its listeners in one process-wide record under a registered symbol;
// a listener added after tap's sees the environment tap made and removes the hook from
// NODE_OPTIONS, leaving every other option as it was.

interface SpawnOptions {
  env: Record<string, string | undefined>;
}
interface SpawnHookState {
  listeners: Array<(options: SpawnOptions) => void>;
}

const state = (globalThis as Record<symbol, unknown>)[
  Symbol.for('process-on-spawn@*:singletonId')
] as SpawnHookState | undefined;

const TAP_HOOK =
  /"?--(?:import|loader|experimental-loader)=[^\s"]*@tapjs[/\\]processinfo[^\s"]*"?/g;

/** NODE_OPTIONS without tap's process-info hook (`--import=…` or `--loader=…` into it). */
export function withoutTapHook(nodeOptions: string): string {
  return nodeOptions.replace(TAP_HOOK, '').trim();
}

function stripHook(options: SpawnOptions): void {
  const nodeOptions = options.env['NODE_OPTIONS'];
  if (nodeOptions === undefined) return;
  const plain = withoutTapHook(nodeOptions);
  const env = { ...options.env };
  if (plain === '') delete env['NODE_OPTIONS'];
  else env['NODE_OPTIONS'] = plain;
  options.env = env;
}

if (process.env['_TAPJS_PROCESSINFO_COVERAGE_'] === '0' && state !== undefined)
  state.listeners.push(stripHook);
