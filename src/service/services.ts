// What the data-plane service runs on in a listener: the index view, the engine client, the
// authenticator, the upload and download pipelines and the settings. A transport adapter holds
// this bag and hands it to the service's operations; it never reads the index or calls an
// engine operation's helpers itself (test/tidy.test.ts).

import type { IndexStore } from '../engine/index/store.js';
import type { EngineClient } from '../engine/protocol.js';
import type { Settings } from '../util/config.js';
import type { Authenticator } from './auth.js';
import type { DownloadServices } from './download.js';
import type { UploadServices } from './upload.js';

/** The listener's read-only view of the index, as the service's operations take it. */
export type IndexView = IndexStore;

export interface DataServices {
  readonly store: IndexView;
  readonly engine: EngineClient;
  readonly auth: Authenticator;
  readonly upload: UploadServices;
  readonly download: DownloadServices;
  readonly settings: Settings;
  /** Whether the listener serves TLS (token minting needs it, or a loopback peer). */
  readonly tls: boolean;
}
