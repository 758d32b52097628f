/**
 * File replay through the `pcap-parser` package (the design card's named reader), kept as a
 * fallback behind the CaptureSource interface. It falls short, so FileSource (our own reader in
 * pcap-file.ts) is the default: pcap-parser reads classic pcap with microsecond timestamps only
 * (no nanosecond magic, no pcapng), checks neither the version's minor number nor the link-type
 * field's reserved bits, and copies its whole pending buffer on every chunk it receives.
 *
 * It also trusts each record's captured length: it buffers the stream until that many bytes are
 * there, so a record claiming 4 GiB makes it hold (and copy, chunk by chunk) the rest of the file,
 * and a file cut inside its last record simply ends. Its `packetHeader` event comes before it
 * buffers the record, so each header is checked there against the reader's bound (MAX_SNAPLEN:
 * FILE_BAD_RECORD, as pcap-file.ts), and the end of the file against the records read
 * (FILE_TRUNCATED, as pcap-file.ts).
 */
import { existsSync, statSync } from 'node:fs';
import { HoptraceError } from '../../common/errors';
import type { PacketEvent } from '../../common/event';
import { decodeFrame, linktypeOf, type DecodeOptions } from '../../core/decode/frame';
import { toPacketEvent, type EventContext } from '../../core/decode/event';
import {
  damagedLength,
  HINT_CUT,
  HINT_DAMAGED,
  HINT_FORMAT,
  MAX_SNAPLEN,
} from '../../offline/pcap-file';
import type { CaptureSource, CaptureSpec, CaptureStats } from './source';

interface PcapParserHeader {
  timestampSeconds: number;
  timestampMicroseconds: number;
  capturedLength: number;
  originalLength: number;
}

interface PcapParserPacket {
  header: PcapParserHeader;
  data: Buffer;
}

interface PcapParser {
  on(
    event: 'globalHeader',
    fn: (h: { linkLayerType: number; snapshotLength: number }) => void,
  ): void;
  on(event: 'packetHeader', fn: (h: PcapParserHeader) => void): void;
  on(event: 'packet', fn: (p: PcapParserPacket) => void): void;
  on(event: 'end', fn: () => void): void;
  on(event: 'error', fn: (e: Error) => void): void;
  stream: { pause(): void; destroy(): void };
}

// pcap-parser ships no types; its one entry point parses a path or a readable stream.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const pcapParser = require('pcap-parser') as { parse(path: string): PcapParser };

export interface PcapParserSourceOptions {
  /** Most events per onEvents call (default 256). */
  maxBatch?: number;
  decode?: DecodeOptions;
}

/** Replays a classic (µs) pcap file with pcap-parser. */
export class PcapParserSource implements CaptureSource {
  private parser: PcapParser | undefined;
  private ended = false;
  private delivered = 0;
  private decodeErrors = 0;
  private onEnd: ((err: HoptraceError | null) => void) | undefined;

  constructor(
    readonly path: string,
    private readonly spec: CaptureSpec,
    private readonly opts: PcapParserSourceOptions = {},
  ) {}

  start(
    onEvents: (events: PacketEvent[]) => void,
    onEnd: (err: HoptraceError | null) => void,
  ): Promise<void> {
    if (this.parser !== undefined || this.ended) {
      return Promise.reject(new Error('PcapParserSource.start() called twice'));
    }
    if (this.spec.filter !== undefined && this.spec.filter.trim() !== '') {
      return Promise.reject(
        new HoptraceError('CAPTURE_FILTER_UNSUPPORTED', `filter '${this.spec.filter}'`, {
          where: this.path,
          hint: `replay applies no BPF filter; pre-filter with tcpdump -r in.pcap -w out.pcap 'FILTER'`,
        }),
      );
    }
    // pcap-parser reports a missing file as an unhandled stream error: check first.
    if (!existsSync(this.path)) {
      return Promise.reject(
        new HoptraceError('FILE_NOT_FOUND', 'no such file', {
          where: this.path,
          hint: 'give the path of a pcap file',
        }),
      );
    }
    this.onEnd = onEnd;
    const size = statSync(this.path).size;
    const ctx: EventContext = {
      point: this.spec.point,
      node: this.spec.node,
      iface: this.spec.iface,
    };
    const maxBatch = this.opts.maxBatch ?? 256;
    let linktype = -1;
    let snaplen = 0;
    let index = 0;
    /** The record whose header pcap-parser read last, and where the next one starts. */
    let pending: { index: number; offset: number; caplen: number } | null = null;
    let offset = 24;
    let batch: PacketEvent[] = [];
    const flush = (): void => {
      if (batch.length === 0 || this.ended) return;
      const out = batch;
      batch = [];
      this.delivered += out.length;
      onEvents(out);
    };
    const parser = pcapParser.parse(this.path);
    this.parser = parser;
    return new Promise((resolve, reject) => {
      let opened = false;
      parser.on('globalHeader', (h) => {
        linktype = linktypeOf(h.linkLayerType);
        snaplen = h.snapshotLength;
        opened = true;
        resolve();
      });
      // Before pcap-parser buffers the record: refuse a claim no capture holds, as pcap-file.ts.
      parser.on('packetHeader', (h) => {
        if (this.ended) return;
        pending = { index: index + 1, offset, caplen: h.capturedLength };
        offset += 16 + h.capturedLength;
        if (h.capturedLength <= MAX_SNAPLEN) return;
        parser.stream.pause();
        parser.stream.destroy();
        flush();
        this.finish(
          new HoptraceError(
            'FILE_BAD_RECORD',
            `record ${pending.index} at offset ${pending.offset} claims ${h.capturedLength} captured ` +
              `bytes, above libpcap's maximum of ${MAX_SNAPLEN} (the header's snaplen is ${snaplen})`,
            { where: this.path, hint: HINT_DAMAGED },
          ),
        );
      });
      parser.on('packet', (p) => {
        if (this.ended) return;
        pending = null;
        index++;
        const tsNs =
          BigInt(p.header.timestampSeconds) * 1_000_000_000n +
          BigInt(p.header.timestampMicroseconds) * 1000n;
        // Decoded while `p.data` is valid: the event keeps numbers and strings only.
        const ev = toPacketEvent(
          { index, tsNs, wireLength: p.header.originalLength },
          decodeFrame(linktype, p.data, this.opts.decode),
          ctx,
        );
        if (ev.error !== undefined) this.decodeErrors++;
        batch.push(ev);
        if (batch.length >= maxBatch) flush();
      });
      parser.on('error', (e) => {
        const err = new HoptraceError('FILE_BAD_MAGIC', `pcap-parser: ${e.message}`, {
          where: this.path,
          hint: 'pcap-parser reads classic microsecond pcap only; use the default reader for pcapng or nanosecond files',
        });
        if (!opened) {
          this.ended = true;
          reject(err);
          return;
        }
        this.finish(err);
      });
      parser.on('end', () => {
        if (!opened) {
          // Shorter than a pcap header: pcap-parser never says so, and start() would never settle.
          this.ended = true;
          reject(
            new HoptraceError('FILE_TOO_SHORT', `${size} bytes, a pcap header needs 24`, {
              where: this.path,
              hint: HINT_FORMAT,
            }),
          );
          return;
        }
        flush();
        this.finish(this.cutAtEnd(pending, index, offset, size, snaplen));
      });
    });
  }

  /**
   * FILE_TRUNCATED when the file ends inside a record (pcap-parser just stops), FILE_BAD_RECORD
   * when that record's length is damaged (damagedLength), with the words of pcap-file.ts; null
   * when it ends after one.
   */
  private cutAtEnd(
    pending: { index: number; offset: number; caplen: number } | null,
    records: number,
    next: number,
    size: number,
    snaplen: number,
  ): HoptraceError | null {
    let detail: string;
    if (pending !== null) {
      const has = size - pending.offset - 16;
      const damaged = damagedLength(pending.index, pending.offset, pending.caplen, snaplen, has);
      if (damaged !== null)
        return new HoptraceError('FILE_BAD_RECORD', damaged, {
          where: this.path,
          hint: HINT_DAMAGED,
        });
      detail = `record ${pending.index} at offset ${pending.offset} needs ${pending.caplen} bytes, the file has ${has}`;
    } else if (next < size) {
      detail = `record ${records + 1} header cut after ${size - next} bytes at offset ${next}`;
    } else return null;
    return new HoptraceError('FILE_TRUNCATED', detail, { where: this.path, hint: HINT_CUT });
  }

  private finish(err: HoptraceError | null): void {
    if (this.ended) return;
    this.ended = true;
    this.onEnd?.(err);
  }

  stop(): Promise<void> {
    if (this.parser !== undefined && !this.ended) {
      this.parser.stream.pause();
      this.parser.stream.destroy();
    }
    this.finish(null);
    return Promise.resolve();
  }

  stats(): CaptureStats {
    return {
      packets: this.delivered,
      decodeErrors: this.decodeErrors,
      kernelDrops: null,
      ifaceDrops: null,
      queueDrops: 0,
    };
  }
}
