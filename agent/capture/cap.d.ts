// The part of the `cap` 0.2.1 API hoptrace uses (the package ships no types).
declare module 'cap' {
  import type { EventEmitter } from 'node:events';

  interface CapAddress {
    addr?: string;
    netmask?: string;
    broadaddr?: string;
  }
  interface CapDevice {
    name: string;
    description?: string;
    addresses: CapAddress[];
    flags?: string;
  }

  class Cap extends EventEmitter {
    /** Opens `device`; returns the link type name ('ETHERNET', 'RAW', ...). Throws on failure. */
    open(device: string, filter: string, bufSize: number, buffer: Buffer): string;
    close(): void;
    on(event: 'packet', listener: (nbytes: number, truncated: boolean) => void): this;
    static deviceList(): CapDevice[];
    static findDevice(ip?: string): string | undefined;
  }
}
