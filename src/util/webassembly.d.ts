// The part of the WebAssembly JavaScript API that Lightwell uses (engine/gear-kernel.ts,
// service/body-arena.ts). Node provides the API as a global; the type definitions in use (lib
// es2023 and @types/node 20) do not declare it, and lib "dom" would declare far more than Node
// has.

declare namespace WebAssembly {
  interface MemoryDescriptor {
    initial: number;
    maximum?: number;
    shared?: boolean;
  }

  class Memory {
    constructor(descriptor: MemoryDescriptor);
    /** A SharedArrayBuffer when the memory is shared. */
    readonly buffer: ArrayBuffer | SharedArrayBuffer;
  }

  // eslint-disable-next-line @typescript-eslint/no-extraneous-class -- opaque: only passed on
  class Module {
    constructor(bytes: Uint8Array);
  }

  class Instance {
    constructor(module: Module, imports?: Record<string, Record<string, unknown>>);
    readonly exports: Record<string, unknown>;
  }

  class Global {
    value: unknown;
  }
}
