/**
 * `hoptrace analyze`'s command line, every flag checked before anything is read or written: a
 * usage error leaves no report directory behind.
 */
import { HoptraceError } from '../common/errors';
import { canonicalIP } from '../common/address';
import type { Inventory } from '../common/inventory';
import { readInventoryInput } from '../common/inventory-file';
import type { PointFile, RequestSelector } from '../offline/analyze-files';
import { checkPointInputs, stdinFile } from '../offline/point-inputs';
import { parseCommandLine } from './args';

export const USAGE =
  'hoptrace analyze --point NAME=FILE [--point NAME=FILE]... [--drops NAME=N]... [--inventory inv.json] [--client IP] [--dst IP[:PORT]] [--doctor doctor.json] [--json] [--report-dir DIR [--evidence-payload]] [--parallel auto|on|off]';

/** Parses `NAME=FILE`. */
export function parsePointArg(value: string): PointFile {
  const eq = value.indexOf('=');
  const name = value.slice(0, eq);
  const file = value.slice(eq + 1);
  if (eq <= 0 || file === '' || !/^[a-z][a-z0-9-]{0,31}$/.test(name)) {
    throw new HoptraceError('CLI_BAD_POINT', `'${value}' is not NAME=FILE`, {
      where: '--point',
      hint: 'e.g. --point decap=decap.pcap; NAME is lower-case letters, digits and dashes',
    });
  }
  return { name, file };
}

/**
 * Parses the `--drops NAME=N` values against the points: the packets a point's capture dropped, as
 * its tool printed them when it stopped (tcpdump: "N packets dropped by kernel").
 */
export function parseDropsArgs(values: string[], points: PointFile[]): Map<string, number> {
  const drops = new Map<string, number>();
  for (const value of values) {
    const m = /^([a-z][a-z0-9-]{0,31})=(\d{1,15})$/.exec(value);
    if (m === null) {
      throw new HoptraceError('CLI_USAGE', `'${value}' is not NAME=N`, {
        where: '--drops',
        hint: 'the count tcpdump printed for that point\'s file ("N packets dropped by kernel"), e.g. --drops backend=0',
      });
    }
    const [, name = '', n = '0'] = m;
    if (!points.some((p) => p.name === name)) {
      throw new HoptraceError('CLI_BAD_POINT', `--drops names '${name}', which is not a point`, {
        where: '--drops',
        hint: `the points are ${points.map((p) => p.name).join(', ')}`,
      });
    }
    if (drops.has(name))
      throw new HoptraceError('CLI_BAD_POINT', `--drops for '${name}' is given twice`, {
        where: '--drops',
      });
    drops.set(name, Number(n));
  }
  return drops;
}

/**
 * `--parallel auto|on|off`: the later points on worker threads when a later file holds 64 MiB or
 * more (auto, the default), whatever their size (on), or never (off). undefined is auto.
 */
export function parseParallelArg(value: string | undefined): boolean | undefined {
  if (value === undefined || value === 'auto') return undefined;
  if (value === 'on') return true;
  if (value === 'off') return false;
  throw new HoptraceError('CLI_USAGE', `'${value}' is not auto, on or off`, {
    where: '--parallel',
    hint: 'auto (the default): worker threads for later files of 64 MiB or more; on: always; off: never',
  });
}

/** Parses `IP` or `IP:PORT` / `[IPv6]:PORT` for --dst; the address as the decoder writes it. */
export function parseDstArg(value: string): { dst: string; dport?: number } {
  const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(value) ?? /^([^:]+)(?::(\d+))?$/.exec(value);
  const ip = canonicalIP(m?.[1] ?? value);
  const port = m?.[2];
  if (ip === null || (port !== undefined && (Number(port) < 1 || Number(port) > 65535))) {
    const bare = canonicalIP(value); // a bare IPv6 address
    if (bare !== null) return { dst: bare };
    throw new HoptraceError('CLI_USAGE', `'${value}' is not IP or IP:PORT`, {
      where: '--dst',
      hint: 'e.g. --dst 10.96.0.10:80',
    });
  }
  return port === undefined ? { dst: ip } : { dst: ip, dport: Number(port) };
}

/** `--report-dir DIR`: a path to create, never the empty one (which would write into `.`). */
export function parseReportDirArg(value: string | undefined): string | undefined {
  if (value === '')
    throw new HoptraceError(
      'CLI_USAGE',
      'the path is empty (it would write the bundle into the current directory)',
      {
        where: '--report-dir',
        hint: 'give the directory to write the bundle into, e.g. --report-dir out/, or --report-dir . for this one',
      },
    );
  return value;
}

/**
 * `--evidence-payload` sets what the bundle's evidence.pcapng keeps: without `--report-dir` no
 * bundle is written and it would do nothing, so it is refused rather than taken silently.
 */
export function parseEvidencePayloadArg(given: boolean, reportDir: string | undefined): boolean {
  if (given && reportDir === undefined)
    throw new HoptraceError(
      'CLI_USAGE',
      "--evidence-payload needs --report-dir (it says what the bundle's evidence.pcapng keeps)",
      {
        where: 'hoptrace analyze',
        hint: 'add --report-dir DIR to write the bundle, or leave out --evidence-payload',
      },
    );
  return given;
}

/** `hoptrace analyze`'s arguments, checked. */
export interface AnalyzeArgs {
  points: PointFile[];
  selector: RequestSelector;
  inventory: Inventory;
  inventoryFile: string | undefined;
  /** SHA-256 and size of the `--inventory` file's bytes as read (undefined: none given). */
  inventoryDigest: { sha256: string; bytes: number } | undefined;
  drops: Map<string, number>;
  doctorFile: string | undefined;
  json: boolean;
  reportDir: string | undefined;
  /** evidence.pcapng keeps the payload (`--evidence-payload`). */
  payload: boolean;
  parallel: boolean | undefined;
}

/** Parses and checks every flag (and reads the inventory); throws HoptraceError, creates nothing. */
export function parseAnalyzeArgs(argv: string[]): AnalyzeArgs {
  const { values, positionals } = parseCommandLine('analyze', USAGE, argv, {
    point: { type: 'string', multiple: true },
    drops: { type: 'string', multiple: true },
    inventory: { type: 'string' },
    client: { type: 'string' },
    dst: { type: 'string' },
    doctor: { type: 'string' },
    json: { type: 'boolean' },
    'report-dir': { type: 'string' },
    'evidence-payload': { type: 'boolean' },
    parallel: { type: 'string' },
  });
  if (positionals.length > 0) {
    throw new HoptraceError('CLI_USAGE', `unexpected argument '${String(positionals[0])}'`, {
      where: 'hoptrace analyze',
      hint: `usage: ${USAGE}`,
    });
  }
  // `-` redirected from a regular file is that file (point-inputs.ts stdinFile).
  const points = (values.point ?? [])
    .map(parsePointArg)
    .map((p) => ({ ...p, file: stdinFile(p.file) }));
  if (points.length < 2) {
    throw new HoptraceError('CLI_USAGE', 'give at least two capture points, in path order', {
      where: 'hoptrace analyze',
      hint: 'e.g. --point decap=A.pcap --point egress=B.pcap --point backend=C.pcap',
    });
  }
  const seen = new Set<string>();
  for (const p of points) {
    if (seen.has(p.name))
      throw new HoptraceError('CLI_BAD_POINT', `point '${p.name}' is given twice`, {
        where: '--point',
      });
    seen.add(p.name);
  }
  const selector: RequestSelector = {};
  if (values.client !== undefined) {
    const client = canonicalIP(values.client);
    if (client === null) {
      throw new HoptraceError('CLI_USAGE', `'${values.client}' is not an IP address`, {
        where: '--client',
        hint: 'the client tunnel address, e.g. --client 10.90.0.42',
      });
    }
    selector.client = client;
  }
  if (values.dst !== undefined) Object.assign(selector, parseDstArg(values.dst));
  const drops = parseDropsArgs(values.drops ?? [], points);
  const parallel = parseParallelArg(values.parallel);
  const reportDir = parseReportDirArg(values['report-dir']);
  const payload = parseEvidencePayloadArg(values['evidence-payload'] === true, reportDir);
  // The first point a file, no capture given for two points (offline/point-inputs.ts).
  checkPointInputs(points);
  const given = values.inventory === undefined ? undefined : readInventoryInput(values.inventory);
  return {
    points,
    selector,
    inventory: given?.inventory ?? { nodes: {}, pods: {} },
    inventoryFile: values.inventory,
    inventoryDigest: given === undefined ? undefined : { sha256: given.sha256, bytes: given.bytes },
    drops,
    doctorFile: values.doctor,
    json: values.json === true,
    reportDir,
    payload,
    parallel,
  };
}
