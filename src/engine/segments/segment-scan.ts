// Reads a segment file record by record without loading it whole: the basis of recovery (find
// the torn tail) and of compaction (find the records that are still live).

import {
  decodeRecordHeader,
  verifyPayload,
  RECORD_HEADER_SIZE,
  type RecordHeader,
} from '../../format/record-frame.js';
import { decodeSegmentHeader, SEGMENT_HEADER_SIZE } from '../../format/segment-header.js';
import { isLightwellError } from '../../util/errors.js';
import { nodeIo, type Io } from '../../util/io.js';

export interface ScannedRecord {
  readonly offset: number;
  readonly header: RecordHeader;
  /** The whole record (header and payload), only when `withBytes` was asked for. */
  readonly bytes?: Buffer;
}

export interface SegmentScan {
  readonly segmentId: number | undefined;
  readonly fileSize: number;
  /** End of the last intact record: where a torn tail is cut. */
  readonly validEnd: number;
  readonly torn: boolean;
}

/** Walks every intact record; stops at the first that fails its checks. */
export async function scanSegment(
  path: string,
  visit: (record: ScannedRecord) => void | Promise<void>,
  options: { withBytes: boolean; io?: Io },
): Promise<SegmentScan> {
  const handle = await (options.io ?? nodeIo).open(path, 'r');
  try {
    const fileSize = (await handle.stat()).size;
    const head = Buffer.alloc(SEGMENT_HEADER_SIZE);
    const { bytesRead } = await handle.read(head, 0, SEGMENT_HEADER_SIZE, 0);
    let segmentId: number | undefined;
    try {
      if (bytesRead < SEGMENT_HEADER_SIZE) throw new RangeError('short header');
      segmentId = decodeSegmentHeader(head).segmentId;
    } catch {
      return { segmentId: undefined, fileSize, validEnd: 0, torn: true };
    }
    let offset = SEGMENT_HEADER_SIZE;
    const frame = Buffer.alloc(RECORD_HEADER_SIZE);
    while (offset + RECORD_HEADER_SIZE <= fileSize) {
      await handle.read(frame, 0, RECORD_HEADER_SIZE, offset);
      const header = tryDecode(frame);
      if (!header || offset + header.recordLength > fileSize) break;
      const record = Buffer.allocUnsafe(header.recordLength);
      await handle.read(record, 0, header.recordLength, offset);
      // The header is checked again in the bytes handed on: compaction copies them verbatim,
      // and a second read may differ from the first (a bit flipped on the way, found by the
      // fault simulation), so a record whose copy does not check whole is never passed on.
      const again = tryDecode(record);
      if (!again || again.recordLength !== header.recordLength) break;
      if (!payloadIntact(again, record)) break;
      await visit(options.withBytes ? { offset, header, bytes: record } : { offset, header });
      offset += header.recordLength;
    }
    return { segmentId, fileSize, validEnd: offset, torn: offset !== fileSize };
  } finally {
    await handle.close();
  }
}

function tryDecode(frame: Buffer): RecordHeader | undefined {
  try {
    return decodeRecordHeader(frame, 0);
  } catch (error) {
    if (isLightwellError(error)) return undefined;
    throw error;
  }
}

function payloadIntact(header: RecordHeader, record: Buffer): boolean {
  try {
    verifyPayload(header, record.subarray(RECORD_HEADER_SIZE));
    return true;
  } catch (error) {
    if (isLightwellError(error)) return false;
    throw error;
  }
}
