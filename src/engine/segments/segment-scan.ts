// Reads a segment file record by record without loading it whole: the basis of recovery (find
// the torn tail) and of compaction (find the records that are still live).
//
// A seal footer (seal-footer.ts) is checked where it is found: it must end the file, name its
// own offset as `dataEnd` and count the records before it; one that does is visited last, as
// any record (kind 2: compaction copies only chunks). A footer that does not is damage:
// the scan stops before it (`torn`), so compaction leaves the segment alone. A segment sealed
// before recovery wrote footers has none, and scans to its end as before.

import {
  decodeRecordHeader,
  verifyPayload,
  RECORD_HEADER_SIZE,
  RECORD_KIND_SEAL,
  type RecordHeader,
} from '../../format/record-frame.js';
import { decodeSegmentHeader, SEGMENT_HEADER_SIZE } from '../../format/segment-header.js';
import { isLightwellError } from '../../util/errors.js';
import { decodeSealPayload } from '../../format/seal-footer.js';
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
  /** Intact records before the footer (or the end). */
  readonly records: number;
  /** The segment ends in a seal footer that agrees with it. */
  readonly sealed: boolean;
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
      return { segmentId: undefined, fileSize, validEnd: 0, torn: true, records: 0, sealed: false };
    }
    let records = 0;
    let sealed = false;
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
      if (again.kind === RECORD_KIND_SEAL) {
        sealed = footerAgrees(again, record, offset, records, fileSize);
        if (!sealed) break;
        await visit(options.withBytes ? { offset, header, bytes: record } : { offset, header });
        offset += header.recordLength;
        break;
      }
      await visit(options.withBytes ? { offset, header, bytes: record } : { offset, header });
      offset += header.recordLength;
      records += 1;
    }
    return { segmentId, fileSize, validEnd: offset, torn: offset !== fileSize, records, sealed };
  } finally {
    await handle.close();
  }
}

/** The footer ends the file, names its own offset and counts the records before it. */
function footerAgrees(
  header: RecordHeader,
  record: Buffer,
  offset: number,
  records: number,
  fileSize: number,
): boolean {
  try {
    const footer = decodeSealPayload(header, record.subarray(RECORD_HEADER_SIZE));
    return (
      footer.dataEnd === offset &&
      footer.recordCount === records &&
      offset + header.recordLength === fileSize
    );
  } catch (error) {
    if (isLightwellError(error)) return false;
    throw error;
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
