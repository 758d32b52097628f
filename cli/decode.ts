/**
 * `hoptrace decode [--json] [--vxlan-port N]... [--geneve-port N]... [--wireguard-port N]... FILE`
 * One line per frame: a human summary, or with --json one NDJSON object per frame. Times are UTC,
 * with the digits the file recorded (µs, or ns when it has them).
 */
import { HoptraceError, isHoptraceError } from '../common/errors';
import type { Tuple } from '../common/event';
import { openCaptureFile } from '../offline/pcap-file';
import { decodeFrame, type DecodedFrame, type DecodeOptions } from '../core/decode/frame';
import { hostPort } from '../common/endpoint';
import { utcPacketTime } from '../core/report/times';
import { EXIT } from './exit-codes';

export const DECODE_USAGE =
  'usage: hoptrace decode [--json] [--vxlan-port N]... [--geneve-port N]... [--wireguard-port N]... FILE';

interface DecodeArgs {
  json: boolean;
  file: string;
  opts: DecodeOptions;
}

const PORT_FLAGS: Record<string, 'vxlanPorts' | 'genevePorts' | 'wireguardPorts'> = {
  '--vxlan-port': 'vxlanPorts',
  '--geneve-port': 'genevePorts',
  '--wireguard-port': 'wireguardPorts',
};
const PORT_DEFAULTS = { vxlanPorts: [4789, 8472], genevePorts: [6081], wireguardPorts: [51820] };

function usage(detail: string): never {
  throw new HoptraceError('CLI_USAGE', detail, { where: 'hoptrace decode', hint: DECODE_USAGE });
}

/** Parses decode's arguments; port flags add to the default ports ("Decode As"). */
export function parseDecodeArgs(argv: string[]): DecodeArgs {
  let json = false;
  let file: string | undefined;
  const ports: Partial<Record<'vxlanPorts' | 'genevePorts' | 'wireguardPorts', number[]>> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    const eq = a.indexOf('=');
    const name = a.startsWith('--') && eq > 0 ? a.slice(0, eq) : a;
    const key = PORT_FLAGS[name];
    if (a === '--json') {
      json = true;
    } else if (key !== undefined) {
      const v = eq > 0 && name !== a ? a.slice(eq + 1) : argv[++i];
      if (v === undefined || !/^\d{1,5}$/.test(v) || Number(v) < 1 || Number(v) > 65535) {
        usage(
          `${name} needs a port number 1-65535, got ${v === undefined ? 'nothing' : JSON.stringify(v)}`,
        );
      }
      (ports[key] ??= [...PORT_DEFAULTS[key]]).push(Number(v));
    } else if (a.startsWith('-') && a !== '-') {
      usage(`unknown flag ${a}`);
    } else if (file === undefined) {
      file = a;
    } else {
      usage(`one capture file expected, got ${JSON.stringify(file)} and ${JSON.stringify(a)}`);
    }
  }
  if (file === undefined) usage('no capture file given');
  const opts: DecodeOptions = {};
  if (ports.vxlanPorts !== undefined) opts.vxlanPorts = ports.vxlanPorts;
  if (ports.genevePorts !== undefined) opts.genevePorts = ports.genevePorts;
  if (ports.wireguardPorts !== undefined) opts.wireguardPorts = ports.wireguardPorts;
  return { json, file, opts };
}

function endpoint(addr: string, port: number | undefined): string {
  if (port === undefined) return addr;
  return hostPort(addr, port);
}

function tupleText(t: Tuple): string {
  return `${endpoint(t.src, t.sport)} > ${endpoint(t.dst, t.dport)}`;
}

const FLAG_LETTERS: [number, string][] = [
  [0x02, 'S'],
  [0x01, 'F'],
  [0x04, 'R'],
  [0x08, 'P'],
  [0x20, 'U'],
  [0x40, 'E'],
  [0x80, 'W'],
  [0x10, '.'],
];

/** tcpdump-style flag letters (S, F, R, P, U, E, W, '.' for ACK). */
export function tcpFlagText(flags: number): string {
  let s = '';
  for (const [bit, letter] of FLAG_LETTERS) if ((flags & bit) !== 0) s += letter;
  return s === '' ? 'none' : s;
}

/** The human one-line summary of a decoded frame: number, UTC time, layers, tuples, keys. */
export function formatFrameLine(n: number, tsNs: bigint, d: DecodedFrame): string {
  const parts: string[] = [String(n), utcPacketTime(tsNs)];
  if (d.layers.length === 0) parts.push(d.linktype);
  for (const l of d.layers) parts.push(l.kind);
  if (d.inner !== null) parts.push(tupleText(d.inner));
  if (d.outer !== null) parts.push(`[outer ${tupleText(d.outer)}]`);
  for (const t of d.tunnels) parts.push(t.id === undefined ? t.kind : `${t.kind}:${t.id}`);
  if (d.related !== undefined) parts.push(`[related ${d.related.proto} ${tupleText(d.related)}]`);
  const k = d.keys;
  if (k.tcpFlags !== undefined)
    parts.push(
      `flags ${tcpFlagText(k.tcpFlags)} seq ${k.tcpSeq ?? 0} ack ${k.tcpAck ?? 0} win ${k.tcpWindow ?? 0}`,
    );
  if (k.ipId !== undefined) parts.push(`id ${k.ipId}`);
  parts.push(`len ${k.payloadLength}`);
  if (k.probeMarker !== undefined) parts.push(`probe ${k.probeMarker}`);
  if (d.truncated) parts.push('truncated');
  if (d.error !== undefined && d.error !== 'DECODE_TRUNCATED') parts.push(d.error);
  return parts.join(' ');
}

function jsonTuple(t: Tuple | null): object | null {
  if (t === null) return null;
  const o: { proto: string; src: string; dst: string; sport?: number; dport?: number } = {
    proto: t.proto,
    src: t.src,
    dst: t.dst,
  };
  if (t.sport !== undefined) o.sport = t.sport;
  if (t.dport !== undefined) o.dport = t.dport;
  return o;
}

/** The --json object of a decoded frame (exactly the documented keys). */
export function frameJSON(n: number, tsNs: bigint, d: DecodedFrame): string {
  const o: Record<string, unknown> = {
    frame: n,
    time: utcPacketTime(tsNs),
    linktype: d.linktype,
    layers: d.layers.map((l) => l.kind),
    outer: jsonTuple(d.outer),
    inner: jsonTuple(d.inner),
    truncated: d.truncated,
  };
  if (d.error !== undefined) o['error'] = d.error;
  return JSON.stringify(o);
}

/**
 * An error with a code on one line, as every command prints one (cli/main.ts); anything else is a
 * bug, left to main's "internal error (please report)" (exit 70).
 */
function report(e: unknown): void {
  if (!isHoptraceError(e)) throw e;
  process.stderr.write(`hoptrace: ${e.message}\n`);
}

/** Runs `hoptrace decode`; returns the exit code (cli/exit-codes.ts: ok, error, usage). */
export function runDecode(argv: string[], out: (line: string) => void): number {
  let args: DecodeArgs;
  try {
    args = parseDecodeArgs(argv);
  } catch (e) {
    report(e);
    return EXIT.usage;
  }
  try {
    // `-`: standard input (a pipe from tcpdump -w -, or a file redirected in).
    const reader = openCaptureFile(args.file);
    for (const f of reader.frames()) {
      const d = decodeFrame(f.linktype, f.data, args.opts);
      out(args.json ? frameJSON(f.index, f.tsNs, d) : formatFrameLine(f.index, f.tsNs, d));
    }
    return EXIT.ok;
  } catch (e) {
    report(e);
    return EXIT.error;
  }
}
