// The commits of small objects stored in one turn of the event loop (the ingest stream's whole
// bodies), sent to the engine as one `putObjects` command instead of a command each: one frame
// to encode and decode, one answer, one sync of the segments they were appended to. Each object
// still commits or fails on its own, with its own audit row, in the engine's group commit
// (engine.ts `runPutGroup`), so a caller sees exactly what a `putObject` of its own would give.

import type { EngineClient } from '../engine/protocol.js';
import { PUT_GROUP_COMMAND, PUT_GROUP_ITEMS_MAX } from '../engine/protocol.js';
import type { ObjectVersionRecord } from '../engine/index/schema.js';
import { fromWire, Internal, type WireError } from '../util/errors.js';

interface Waiting {
  readonly args: Record<string, unknown>;
  readonly resolve: (version: ObjectVersionRecord) => void;
  readonly reject: (error: unknown) => void;
}

type Answer = { readonly r: unknown } | { readonly e: WireError };

export class PutGroup {
  private waiting: Waiting[] = [];

  constructor(private readonly engine: EngineClient) {}

  /** Sends `args` (a whole `putObject` command's) with the others of this turn. */
  commit(args: Record<string, unknown>): Promise<ObjectVersionRecord> {
    return new Promise((resolve, reject) => {
      if (this.waiting.length === 0) setImmediate(() => this.send());
      this.waiting.push({ args, resolve, reject });
      if (this.waiting.length >= PUT_GROUP_ITEMS_MAX) this.send();
    });
  }

  private send(): void {
    const group = this.waiting;
    if (group.length === 0) return;
    this.waiting = [];
    this.engine
      .call<Answer[]>(PUT_GROUP_COMMAND, { items: group.map((waiting) => waiting.args) })
      .then(
        (answers) => {
          group.forEach((waiting, index) => {
            const answer = answers[index];
            if (answer === undefined)
              waiting.reject(
                Internal(`the engine answered ${PUT_GROUP_COMMAND} with fewer results than items`),
              );
            else if ('e' in answer) waiting.reject(fromWire(answer.e));
            else waiting.resolve(answer.r as ObjectVersionRecord);
          });
        },
        (error: unknown) => {
          for (const waiting of group) waiting.reject(error);
        },
      );
  }
}
