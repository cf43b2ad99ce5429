// Shared helpers of the segment tests: temporary directories, valid chunk records, a recording
// segment registry, and fault hooks on node:fs FileHandle.
//
// This module is a helper, not a test; tap lists it as "no tests found".
//
// Fault hooks: the segment code does its I/O through node:fs/promises FileHandles, and every
// FileHandle shares one prototype. `hookFileHandle` wraps a method of that prototype for the
// duration of one test (restored in teardown), so a test can hold a write or an fdatasync at a
// gate, count calls, or fail one call with EIO, without any mock of the module under test.

import { mkdtempSync, rmSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import {
  encodeRecord,
  RECORD_KIND_CHUNK,
  COMPRESSION_NONE,
  CIPHER_NONE,
} from '../../src/format/record-frame.js';
import type { SegmentRegistry } from '../../src/engine/segments/segment-writer.js';

export interface TapLike {
  teardown(fn: () => unknown): void;
}

export function tempDir(t: TapLike, prefix = 'lw-seg-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A valid, unencrypted chunk record of `payloadBytes` random payload bytes. */
export function chunkRecord(
  payloadBytes: number,
  options: { tenantNum?: number; chunkId?: Buffer; payload?: Buffer } = {},
): Buffer {
  const payload = options.payload ?? randomBytes(payloadBytes);
  return encodeRecord(
    {
      kind: RECORD_KIND_CHUNK,
      compression: COMPRESSION_NONE,
      cipher: CIPHER_NONE,
      tenantNum: options.tenantNum ?? 1,
      plainLength: payload.length,
      chunkId: options.chunkId ?? randomBytes(32),
      nonce: Buffer.alloc(12),
    },
    payload,
  );
}

/** A registry that hands out ids 1, 2, 3… and records every seal. */
export class RecordingRegistry implements SegmentRegistry {
  next = 1;
  readonly sealed: Array<{ segmentId: number; size: number }> = [];

  allocate(): Promise<number> {
    return Promise.resolve(this.next++);
  }

  seal(segmentId: number, size: number): Promise<void> {
    this.sealed.push({ segmentId, size });
    return Promise.resolve();
  }
}

type FileHandleProto = Record<string, (...args: unknown[]) => Promise<unknown>>;

let proto: FileHandleProto | undefined;

async function fileHandleProto(): Promise<FileHandleProto> {
  if (!proto) {
    const handle: FileHandle = await open(process.execPath, 'r');
    proto = Object.getPrototypeOf(handle) as FileHandleProto;
    await handle.close();
  }
  return proto;
}

/**
 * Wraps `FileHandle.prototype[method]` until the test ends. `around` receives the original call
 * (bound to the handle, with its arguments) and the arguments, and returns the result.
 */
export async function hookFileHandle(
  t: TapLike,
  method: 'datasync' | 'writev' | 'write' | 'sync' | 'truncate',
  around: (
    original: () => Promise<unknown>,
    args: unknown[],
    handle: FileHandle,
  ) => Promise<unknown>,
): Promise<void> {
  const target = await fileHandleProto();
  const original = target[method] as (...args: unknown[]) => Promise<unknown>;
  target[method] = function (this: FileHandle, ...args: unknown[]) {
    return around(() => original.apply(this, args), args, this);
  };
  t.teardown(() => {
    target[method] = original;
  });
}

/** A promise with its resolver, for gates. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

/** Resolves after the event loop turned `turns` times through timers (lets I/O settle). */
export function settle(ms = 30): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A pid that belonged to a process that has exited (so `processAlive` is false). */
export function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], {
    encoding: 'utf8',
  });
  return Number(child.stdout);
}

/** Settles a promise-tracking flag: true once the promise resolved or rejected. */
export function track<T>(promise: Promise<T>): {
  settled: boolean;
  ok: boolean | undefined;
  error: unknown;
  promise: Promise<T>;
} {
  const state = {
    settled: false,
    ok: undefined as boolean | undefined,
    error: undefined as unknown,
    promise,
  };
  promise.then(
    () => {
      state.settled = true;
      state.ok = true;
    },
    (error: unknown) => {
      state.settled = true;
      state.ok = false;
      state.error = error;
    },
  );
  return state;
}
