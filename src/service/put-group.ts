// The object commits of one turn of the event loop (an ingest stream's small objects, the PUTs
// of many connections), sent to the engine as one `putObjects` command instead of a command
// each: one frame to encode and decode, one answer, one sync of the segments they point into.
// The items travel in a compact fixed-layout encoding (engine/put-group-codec.ts), not as a
// msgpack map each. Each object
// still commits or fails on its own, with its own audit row, in the engine's group commit
// (engine.ts `runPutGroup`), so a caller sees exactly what a `putObject` of its own would give.

import type { CommandArgs } from '../engine/commands.js';
import type { EngineClient } from '../engine/protocol.js';
import { FRAME_BYTES_MAX, PUT_GROUP_COMMAND, PUT_GROUP_ITEMS_MAX } from '../engine/protocol.js';
import type { ObjectVersionRecord } from '../engine/index/schema.js';
import { encodePutGroup } from '../engine/put-group-codec.js';
import { fromWire, Internal } from '../util/errors.js';

/**
 * Where the answers of a group's commands go: `settle(index, version)` for a commit,
 * `settle(index, undefined, error)` for a refusal. One object for many commands (a batch's),
 * not a promise and two callbacks each.
 */
export interface GroupSink {
  settle(index: number, version: ObjectVersionRecord | undefined, error?: unknown): void;
}

interface Waiting {
  readonly args: CommandArgs<'putObject'>;
  readonly sink: GroupSink;
  readonly index: number;
}

/** The sink of one `commit` (a promise's two ends). */
class PromiseSink implements GroupSink {
  constructor(
    private readonly resolve: (version: ObjectVersionRecord) => void,
    private readonly reject: (error: unknown) => void,
  ) {}

  settle(_index: number, version: ObjectVersionRecord | undefined, error?: unknown): void {
    if (version === undefined) this.reject(error);
    else this.resolve(version);
  }
}

/**
 * A group is sent once it may encode to GROUP_BYTES_MAX, an eighth of the engine's frame limit:
 * a command's fields other than its manifest (key, metadata, headers, tags, audit row: each
 * bounded) take ITEM_BYTES or less in practice, each chunk of its manifest under CHUNK_BYTES. A
 * command larger than a group is sent alone.
 */
const GROUP_BYTES_MAX = FRAME_BYTES_MAX / 8;
const ITEM_BYTES = 8 * 1024;
const CHUNK_BYTES = 128;

export class PutGroup {
  private waiting: Waiting[] = [];
  /** What the waiting commands encode to at most, about (ITEM_BYTES, CHUNK_BYTES). */
  private bytes = 0;

  constructor(private readonly engine: EngineClient) {}

  /** Sends `args` (a whole `putObject` command's) with the others of this turn. */
  commit(args: CommandArgs<'putObject'>): Promise<ObjectVersionRecord> {
    return new Promise((resolve, reject) => this.add(args, new PromiseSink(resolve, reject), 0));
  }

  /** `commit`, answered to `sink.settle(index, ...)` instead of a promise. */
  add(args: CommandArgs<'putObject'>, sink: GroupSink, index: number): void {
    if (this.waiting.length === 0) setImmediate(() => this.send());
    this.waiting.push({ args, sink, index });
    this.bytes += ITEM_BYTES + args.chunks.length * CHUNK_BYTES;
    if (this.waiting.length >= PUT_GROUP_ITEMS_MAX || this.bytes >= GROUP_BYTES_MAX) this.send();
  }

  private send(): void {
    const group = this.waiting;
    if (group.length === 0) return;
    this.waiting = [];
    this.bytes = 0;
    const packed = encodePutGroup(group.map((waiting) => waiting.args));
    this.engine.call(PUT_GROUP_COMMAND, { packed }).then(
      (answers) => {
        for (let i = 0; i < group.length; i += 1) {
          const { sink, index } = group[i] as Waiting;
          const answer = answers[i];
          if (answer === undefined)
            sink.settle(
              index,
              undefined,
              Internal(`the engine answered ${PUT_GROUP_COMMAND} with fewer results than items`),
            );
          else if ('e' in answer) sink.settle(index, undefined, fromWire(answer.e));
          else sink.settle(index, answer.r);
        }
      },
      (error: unknown) => {
        for (const { sink, index } of group) sink.settle(index, undefined, error);
      },
    );
  }
}
