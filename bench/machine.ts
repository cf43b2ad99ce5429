// The machine and software a benchmark ran on, recorded with every result so that numbers are
// never compared without their hardware: CPU model and cores, memory, OS, Node, the Lightwell
// and uWebSockets.js versions, the filesystem of the data directory (a tmpfs makes fdatasync
// free) and the load average at the start (the machine may be shared).

import { readFileSync, realpathSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface MachineInfo {
  readonly cpuModel: string;
  readonly cores: number;
  readonly memoryBytes: number;
  readonly os: string;
  readonly node: string;
  readonly lightwell: string;
  readonly uWebSockets: string;
  readonly filesystem: { readonly path: string; readonly type: string; readonly mount: string };
  readonly loadAverage: readonly number[];
}

function readJson(path: string): Record<string, unknown> | null {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  } catch {
    return null;
  }
}

/** The directory of Lightwell's package.json, searched upwards from this module, then from cwd. */
export function findLightwellRoot(): string | null {
  const starts = [dirname(fileURLToPath(import.meta.url)), process.cwd()];
  for (const start of starts) {
    for (let dir = start; ; dir = dirname(dir)) {
      if (readJson(join(dir, 'package.json'))?.['name'] === 'lightwell') return dir;
      if (dirname(dir) === dir) break;
    }
  }
  return null;
}

/** The version in `dir`'s package.json, or `unknown`. */
export function packageVersion(dir: string | null): string {
  const version = dir === null ? undefined : readJson(join(dir, 'package.json'))?.['version'];
  return typeof version === 'string' ? version : 'unknown';
}

/** Filesystem type of `path`: the longest mount point in /proc/mounts that contains it. */
export function filesystemOf(path: string): { path: string; type: string; mount: string } {
  let real = path;
  try {
    real = realpathSync(path);
  } catch {
    // Keep the path as given.
  }
  let best = { mount: '', type: 'unknown' };
  let mounts = '';
  try {
    mounts = readFileSync('/proc/mounts', 'utf8');
  } catch {
    return { path: real, ...best };
  }
  for (const line of mounts.split('\n')) {
    const [, mount, type] = line.split(' ');
    if (mount === undefined || type === undefined) continue;
    const inside = real === mount || real.startsWith(mount.endsWith('/') ? mount : `${mount}/`);
    if (inside && mount.length > best.mount.length) best = { mount, type };
  }
  return { path: real, ...best };
}

export function machineInfo(dataParent: string): MachineInfo {
  const root = findLightwellRoot();
  const uwsDir = root === null ? null : join(root, 'node_modules', 'uWebSockets.js');
  const uwsName = uwsDir === null ? undefined : readJson(join(uwsDir, 'package.json'))?.['name'];
  return {
    cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown',
    cores: os.availableParallelism(),
    memoryBytes: os.totalmem(),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    lightwell: packageVersion(root),
    uWebSockets: `${typeof uwsName === 'string' ? uwsName : 'unknown'}@${packageVersion(uwsDir)}`,
    filesystem: filesystemOf(dataParent),
    loadAverage: os.loadavg().map((value) => Math.round(value * 100) / 100),
  };
}
