// The file-system seam of the storage engine: every open, read, write, sync, truncate, rename,
// unlink and listing that the engine, the segment writers and readers (in the engine and in the
// gateway's workers) do goes through an `Io`. Production binds it to node:fs (`nodeIo`), with
// no wrapper on the data path: `nodeIo.open` answers node's own FileHandle, and `pread` is the
// callback `fs.read` the reader already used. Tests bind a seeded fault-injecting file system
// (test/fault/fault-io.ts) that models the page cache, fdatasync and crashes.
//
// Invariants:
// - A file is durable only after `datasync`/`sync` of it resolved; its directory entry (a new
//   file, a rename, an unlink) only after `syncDirectory` of its directory resolved.
// - A failed `datasync` leaves the unsynced bytes in an unknown state: callers never retry it
//   as if the data were safe (segment-writer.ts breaks the segment instead).
// - `fd` is a real descriptor only when `native` is true: the libc fast paths (preadv2 of the
//   page cache, sync_file_range, O_DIRECT) are used only then.

import { constants, read as readCallback } from 'node:fs';
import { open, readdir, rename, stat, statfs, unlink } from 'node:fs/promises';

/** The operations of an open file that the engine uses (node's FileHandle has them all). */
export interface IoFile {
  /** The descriptor; meaningful only when the `Io` is native. */
  readonly fd: number;
  read(
    buffer: Buffer,
    offset: number,
    length: number,
    position: number,
  ): Promise<{ bytesRead: number }>;
  write(
    buffer: Buffer,
    offset: number,
    length: number,
    position: number,
  ): Promise<{ bytesWritten: number }>;
  writev(buffers: Buffer[], position: number): Promise<{ bytesWritten: number }>;
  datasync(): Promise<void>;
  sync(): Promise<void>;
  truncate(length: number): Promise<void>;
  stat(): Promise<{ size: number }>;
  close(): Promise<void>;
}

export interface Io {
  /** The descriptors are real: the libc fast paths may use them. */
  readonly native: boolean;
  open(path: string, flags: string | number, mode?: number): Promise<IoFile>;
  /** A positional read into `target` (the reader's hot path). */
  pread(
    file: IoFile,
    target: Buffer,
    offset: number,
    length: number,
    position: number,
  ): Promise<number>;
  rename(from: string, to: string): Promise<void>;
  unlink(path: string): Promise<void>;
  readdir(path: string): Promise<string[]>;
  /** The size of the file at `path` (rejects with ENOENT when there is none). */
  size(path: string): Promise<number>;
  /** Makes the directory's entries (created, renamed, removed files) durable. */
  syncDirectory(path: string): Promise<void>;
  /**
   * The size of the file system that holds `path`, and the bytes an unprivileged writer may
   * still take (statfs' f_bavail). Absent in a simulated file system that has no such limit.
   */
  statfs?(path: string): Promise<{ totalBytes: number; freeBytes: number }>;
}

function pread(
  file: IoFile,
  target: Buffer,
  offset: number,
  length: number,
  position: number,
): Promise<number> {
  // fs.read with a callback: the promise API costs several times more per call.
  return new Promise((resolve, reject) => {
    readCallback(file.fd, target, offset, length, position, (error, bytesRead) =>
      error ? reject(error) : resolve(bytesRead),
    );
  });
}

async function syncDirectory(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** node:fs, as it is. */
export const nodeIo: Io = {
  native: true,
  open: (path, flags, mode) => open(path, flags, mode),
  pread,
  rename,
  unlink,
  readdir: (path) => readdir(path),
  size: async (path) => (await stat(path)).size,
  syncDirectory,
  statfs: async (path) => {
    const fs = await statfs(path);
    return { totalBytes: fs.blocks * fs.bsize, freeBytes: fs.bavail * fs.bsize };
  },
};

/** O_DIRECT where the platform has it (0 elsewhere: no direct I/O). */
export const O_DIRECT = (constants as { O_DIRECT?: number }).O_DIRECT ?? 0;
export const { O_RDONLY, O_WRONLY } = constants;
