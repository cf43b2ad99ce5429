// Idempotent object PUTs on the gateway (the engine's side is src/engine/ops/idempotency.ts).
// `Idempotency-Key` binds the key to a fingerprint of the request: the object key, the declared
// `X-Service-Checksum-<alg>` digests, the length, the user metadata and the content type. The
// first request verified its body against those digests, so a replay whose body matches all of
// them is the first body again; one that does not is another body under the same key, refused
// with 422 `idempotency_key_reused` as data-api.md's upload rule 1 says.

import { hash } from 'node:crypto';
import type { Exchange } from '../http/exchange.js';
import type { BodySink } from './upload.js';
import { createMultiHasher, type ChecksumAlg, type MultiHasher } from '../engine/checksums.js';
import { BadRequest, IdempotencyKeyReused } from '../util/errors.js';

const IDEMPOTENCY_KEY_CHARS_MAX = 255;

export interface IdempotencyClaim {
  readonly key: string;
  readonly fingerprint: string;
}

/**
 * The claim of a PUT with `Idempotency-Key`, or undefined without one. The key must be visible
 * ASCII and the request must declare at least one checksum (400 otherwise).
 */
export function idempotencyOf(
  exchange: Exchange,
  bound: {
    /** The object key: a key replayed for another object is a reuse, never a replay. */
    objectKey: string;
    expected: ReadonlyMap<ChecksumAlg, Buffer>;
    contentLength: number;
    metadata: Record<string, string>;
    contentType: string;
  },
  key = exchange.header('idempotency-key'),
): IdempotencyClaim | undefined {
  if (key === undefined) return undefined;
  if (key.length === 0 || key.length > IDEMPOTENCY_KEY_CHARS_MAX || !/^[\x21-\x7e]+$/.test(key)) {
    throw BadRequest(
      `Idempotency-Key must be 1 to ${IDEMPOTENCY_KEY_CHARS_MAX} visible ASCII characters`,
    );
  }
  if (bound.expected.size === 0) {
    throw BadRequest(
      'Idempotency-Key requires at least one X-Service-Checksum-<alg> header (CRC32, CRC32C, CRC64NVME, SHA1 or SHA256)',
    );
  }
  const checksums = [...bound.expected]
    .map(([alg, digest]) => [alg, digest.toString('base64')])
    .sort();
  const metadata = Object.entries(bound.metadata).sort();
  // One-shot: a Hash object per request cost more than the digest of these few bytes.
  const fingerprint = hash(
    'sha256',
    JSON.stringify([bound.objectKey, checksums, bound.contentLength, metadata, bound.contentType]),
    'hex',
  );
  return { key, fingerprint };
}

/**
 * The body of a replayed request, hashed on the gateway thread as it arrives with every
 * algorithm the request declared, as the first request was verified (replays are retries,
 * rare; a CRC alone could be matched by another body). `checked` settles once the whole body is
 * in: it resolves if the body matches every declared digest and rejects with 422
 * `idempotency_key_reused` if not, or with the receive error if the body never completes.
 */
export class ReplayBody implements BodySink {
  readonly checked: Promise<void>;
  private settle!: (error?: unknown) => void;

  private constructor(
    private readonly hasher: MultiHasher,
    private readonly expected: ReadonlyMap<ChecksumAlg, Buffer>,
  ) {
    this.checked = new Promise((resolve, reject) => {
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- passed on as is
      this.settle = (error) => (error === undefined ? resolve() : reject(error));
    });
    this.checked.catch(() => undefined);
  }

  static async of(expected: ReadonlyMap<ChecksumAlg, Buffer>): Promise<ReplayBody> {
    if (expected.size === 0) throw BadRequest('an idempotent replay needs a declared checksum');
    return new ReplayBody(await createMultiHasher([...expected.keys()]), expected);
  }

  write(bytes: Uint8Array): void {
    this.hasher.update(bytes);
  }

  end(error?: unknown): void {
    if (error !== undefined) {
      this.hasher.dispose();
      this.settle(error);
      return;
    }
    const digests = this.hasher.digestBytes();
    const differs = [...this.expected].find(([alg, digest]) => !digests[alg].equals(digest));
    if (differs)
      this.settle(
        IdempotencyKeyReused(
          `this Idempotency-Key was used with a different body (its ${differs[0]} differs)`,
        ),
      );
    else this.settle();
  }
}
