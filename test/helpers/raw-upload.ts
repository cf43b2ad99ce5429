// A PUT written on a raw socket as fast as the socket takes it (1 MiB slices, paced only by
// `drain`), for tests of what a uWS listener receives after it pauses. The listener answers
// with the number of bytes it received as the body; the promise resolves with the whole
// response once that number arrives, and rejects if the connection closes first.
import { connect } from 'node:net';

const SLICE_BYTES = 1024 * 1024;

export function rawUpload(port: number, bodyBytes: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(`PUT /body HTTP/1.1\r\nHost: x\r\nContent-Length: ${bodyBytes}\r\n\r\n`);
      const slice = Buffer.alloc(SLICE_BYTES, 7);
      let sent = 0;
      const pump = (): void => {
        while (sent < bodyBytes) {
          sent += slice.length;
          if (!socket.write(slice)) return;
        }
      };
      socket.on('drain', pump);
      pump();
    });
    let text = '';
    socket.on('data', (data: Buffer) => {
      text += data.toString();
      if (text.includes('\r\n\r\n') && text.endsWith(String(bodyBytes))) {
        socket.end();
        resolve(text);
      }
    });
    socket.on('error', reject);
    socket.on('close', () =>
      reject(new TypeError(`connection closed; got ${JSON.stringify(text)}`)),
    );
  });
}
