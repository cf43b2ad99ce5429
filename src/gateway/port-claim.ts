// Which public port a gateway process listens on, and that it is not another store's.
//
// A gateway listens with SO_REUSEPORT so that its listener threads, and the other gateway
// processes of the same data directory, share one port. The same option let a gateway of data
// directory C join the port of a gateway of data directory A: the kernel then spread requests
// between two stores at random. So each gateway registers its port in its data directory
// (`run/gateway-<pid>`, removed at its stop; a file whose process is gone counts for nothing)
// before it binds, and a port that is taken is shared only when a live gateway of this data
// directory registered it.
//
// Port 0 asks the kernel for any port, and the kernel sets SO_REUSEPORT only on a given port
// (uWebSockets.js): with several listener threads, the port is picked here first and given to
// all of them.

import { createServer } from 'node:net';
import { mkdir, readdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { processAlive, type DataDirPaths } from '../engine/data-dir.js';
import { Unavailable } from '../util/errors.js';
import type { ListenAddress } from '../util/config.js';

export interface PortClaim {
  /** The port every listener thread of this process listens on. */
  readonly port: number;
  /** Removes this process's registration. */
  release(): Promise<void>;
}

/** The folder of the gateways' registrations inside a data directory. */
export function runDir(paths: DataDirPaths): string {
  return join(paths.root, 'run');
}

/**
 * Registers this process's port and checks it is not another store's (see the header). With
 * port 0 and one listener, the port stays 0 and is registered once the listener has it
 * (`claim.register`).
 */
export async function claimPublicPort(
  paths: DataDirPaths,
  address: ListenAddress,
  listeners: number,
): Promise<PortClaim & { register(port: number): Promise<void> }> {
  const file = join(runDir(paths), `gateway-${process.pid}`);
  const register = async (port: number): Promise<void> => {
    await mkdir(runDir(paths), { recursive: true });
    await writeFile(file, `${port}\n`);
  };
  const release = async (): Promise<void> => {
    await unlink(file).catch(() => undefined);
  };
  if (address.port === 0) {
    const port = listeners > 1 ? await bindOnce(address) : 0;
    if (port !== 0) await register(port);
    return { port, release, register };
  }
  // Registered before the probe: a gateway of this directory starting at the same moment then
  // finds this one's registration when its own probe meets this one's.
  await register(address.port);
  try {
    await bindOnce(address);
  } catch (error) {
    if (!(await registeredElsewhere(paths, address.port))) {
      await release();
      const where = hostPort(address);
      throw Unavailable(
        `public address ${where} is already in use, and not by a gateway of data directory ` +
          `${paths.root}: another store or program serves it (choose another --public-listen)`,
        {},
        { cause: error },
      );
    }
  }
  return { port: address.port, release, register };
}

/** Whether a live gateway process other than this one registered `port`. */
async function registeredElsewhere(paths: DataDirPaths, port: number): Promise<boolean> {
  const names = await readdir(runDir(paths)).catch(() => [] as string[]);
  for (const name of names) {
    const pid = Number(/^gateway-(\d+)$/.exec(name)?.[1]);
    if (!(pid > 0) || pid === process.pid || !processAlive(pid)) continue;
    const text = await readFile(join(runDir(paths), name), 'utf8').catch(() => '');
    if (Number(text.trim()) === port) return true;
  }
  return false;
}

/** Binds `address` without SO_REUSEPORT for a moment; answers the port bound. */
function bindOnce(address: ListenAddress): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen({ host: address.host, port: address.port, exclusive: true }, () => {
      const bound = probe.address();
      const port = typeof bound === 'object' && bound !== null ? bound.port : address.port;
      probe.close(() => resolve(port));
    });
  });
}

function hostPort(address: ListenAddress): string {
  const host = address.host.includes(':') ? `[${address.host}]` : address.host;
  return `${host}:${address.port}`;
}
