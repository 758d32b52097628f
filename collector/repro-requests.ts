/**
 * The bodies of the repro endpoints (`POST /v1/repros`, `/probes`, `/marks`, `/finish`),
 * validated: any other shape is API_BAD_REQUEST naming the field.
 */
import { isIP } from 'node:net';
import { NODE_NAME_RE } from '../common/agent-names';
import { parseCidr } from '../common/cidr';
import { HoptraceError } from '../common/errors';
import { parseInventory } from '../common/inventory-file';
import { cutText } from '../common/text-cut';
import type {
  ProbeReport,
  ReproMark,
  ReturnRoute,
  WorkloadSelector,
} from '../core/repro/repro-core';
import { isIfaceName, isValidTarget } from './capture-request';
import type { ReproSpec } from './repro-state';

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

function bad(where: string, message: string): HoptraceError {
  return new HoptraceError('API_BAD_REQUEST', message, { where });
}

function str(o: Record<string, unknown>, k: string, where: string): string {
  const v = o[k];
  if (typeof v !== 'string' || v === '')
    throw bad(`${where}.${k}`, `${k} must be a non-empty string`);
  return v;
}

function num(o: Record<string, unknown>, k: string, where: string): number {
  const v = o[k];
  if (typeof v !== 'number' || !Number.isFinite(v))
    throw bad(`${where}.${k}`, `${k} must be a number`);
  return v;
}

/** The longest identifier a probe report carries (probeId, httpCode): the prober's are short. */
export const MAX_REPRO_ID_CHARS = 200;
/**
 * A workload's namespace glob: a namespace file's name is at most 255 bytes (Linux NAME_MAX), so a
 * longer glob names nothing a shorter one would not; the bound also bounds what matching it costs
 * on every agent hello (common/glob.ts: glob length × name length).
 */
export const MAX_WORKLOAD_GLOB_CHARS = 255;

/** A string of at most `limit` characters; longer is API_BAD_REQUEST naming the field. */
function atMost(v: string, limit: number, where: string): string {
  if (v.length > limit) throw bad(where, `at most ${limit} characters (this one has ${v.length})`);
  return v;
}

/** An identifier of at most MAX_REPRO_ID_CHARS; longer is API_BAD_REQUEST naming the field. */
function shortId(v: string, where: string): string {
  return atMost(v, MAX_REPRO_ID_CHARS, where);
}

/** An interface name, as a capture point takes it; anything else is API_BAD_REQUEST. */
function iface(o: Record<string, unknown>, k: string, where: string): string {
  const v = str(o, k, where);
  if (!isIfaceName(v)) throw bad(`${where}.${k}`, 'must be an interface name (1-15 characters)');
  return v;
}

/** A repro runs from one second to a day. */
const MAX_REPRO_MS = 86_400_000;

function reproTimeout(body: Record<string, unknown>): number {
  const v = num(body, 'timeoutMs', 'body');
  if (!Number.isInteger(v) || v < 1000 || v > MAX_REPRO_MS)
    throw bad('body.timeoutMs', `timeoutMs must be an integer from 1000 to ${MAX_REPRO_MS}`);
  return v;
}

/** Validates `POST /v1/repros`. */
export function parseReproRequest(body: unknown): ReproSpec {
  if (!isRecord(body)) throw bad('body', 'the body must be a JSON object');
  const w = body['workload'];
  if (!isRecord(w))
    throw bad(
      'workload',
      'workload must be {netns: GLOB} or {kubernetes: {namespace, labelSelector}}',
    );
  const workload: WorkloadSelector = {};
  if (w['netns'] !== undefined)
    workload.netns = atMost(str(w, 'netns', 'workload'), MAX_WORKLOAD_GLOB_CHARS, 'workload.netns');
  if (w['podCidr'] !== undefined) {
    workload.podCidr = str(w, 'podCidr', 'workload');
    if (parseCidr(workload.podCidr) === null)
      throw bad('workload.podCidr', `"${cutText(workload.podCidr, 64)}" is not a CIDR`);
  }
  const k = w['kubernetes'];
  if (k !== undefined) {
    if (!isRecord(k)) throw bad('workload.kubernetes', 'must be {namespace, labelSelector}');
    workload.kubernetes = {
      namespace: str(k, 'namespace', 'workload.kubernetes'),
      labelSelector: str(k, 'labelSelector', 'workload.kubernetes'),
    };
  }
  if (workload.netns === undefined && workload.kubernetes === undefined)
    throw bad('workload', 'give workload.netns or workload.kubernetes');
  const b = body['backend'];
  if (!isRecord(b)) throw bad('backend', 'backend must be {target, iface, node?}');
  const backend: ReproSpec['backend'] = {
    target: str(b, 'target', 'backend'),
    iface: iface(b, 'iface', 'backend'),
  };
  if (!isValidTarget(backend.target))
    throw bad(
      'backend.target',
      'must be a pod IP, a namespace path (/run/netns/…), a PID or namespace/pod',
    );
  if (b['node'] !== undefined) {
    backend.node = str(b, 'node', 'backend');
    if (!NODE_NAME_RE.test(backend.node)) throw bad('backend.node', 'is not a node name');
  }
  const client = str(body, 'client', 'body');
  if (isIP(client) === 0)
    throw bad('body.client', `"${cutText(client, 64)}" is not an IP address (the tunnel address)`);
  const spec: ReproSpec = {
    workload,
    decapIface: iface(body, 'decapIface', 'body'),
    egressIface: iface(body, 'egressIface', 'body'),
    backend,
    client,
    timeoutMs: body['timeoutMs'] === undefined ? 600_000 : reproTimeout(body),
  };
  if (body['inventory'] !== undefined) {
    // The inventory file's own checks: a pod of null, an address that is not one → 400
    // CLI_BAD_INVENTORY naming the entry.
    spec.inventory = parseInventory(body['inventory'], 'inventory');
  }
  return spec;
}

/** Validates `POST /v1/repros/:id/probes`. */
export function parseProbeReport(body: unknown): ProbeReport {
  if (!isRecord(body)) throw bad('body', 'the body must be a JSON object');
  const sport = num(body, 'sport', 'body');
  if (!Number.isInteger(sport) || sport <= 0 || sport > 65535)
    throw bad('body.sport', 'sport must be a port');
  const http = body['httpCode'];
  const err = body['error'];
  return {
    probeId: shortId(str(body, 'probeId', 'body'), 'body.probeId'),
    sport,
    startedAtMs: num(body, 'startedAtMs', 'body'),
    endedAtMs: num(body, 'endedAtMs', 'body'),
    ok: body['ok'] === true,
    httpCode: typeof http === 'string' ? shortId(http, 'body.httpCode') : null,
    error: typeof err === 'string' ? cutText(err) : null,
  };
}

/** Validates `POST /v1/repros/:id/marks`. */
export function parseMark(body: unknown): ReproMark {
  if (!isRecord(body)) throw bad('body', 'the body must be a JSON object');
  const kind = body['kind'];
  if (kind !== 'deleted' && kind !== 'replacement-ready' && kind !== 'note')
    throw bad('body.kind', 'kind must be deleted, replacement-ready or note');
  return {
    kind,
    atMs: num(body, 'atMs', 'body'),
    detail: typeof body['detail'] === 'string' ? cutText(body['detail']) : '',
  };
}

/** Validates `POST /v1/repros/:id/finish`. */
export function parseFinish(body: unknown): ReturnRoute[] {
  if (body === undefined || body === null) return [];
  if (!isRecord(body)) throw bad('body', 'the body must be a JSON object');
  const routes = body['returnRoutes'];
  if (routes === undefined) return [];
  if (!Array.isArray(routes)) throw bad('body.returnRoutes', 'returnRoutes must be an array');
  return routes.map((x: unknown, i) => {
    if (!isRecord(x)) throw bad(`body.returnRoutes[${i}]`, 'a route is {node, dst, via?, dev?}');
    return {
      node: str(x, 'node', `returnRoutes[${i}]`),
      dst: str(x, 'dst', `returnRoutes[${i}]`),
      via: typeof x['via'] === 'string' ? x['via'] : null,
      dev: typeof x['dev'] === 'string' ? x['dev'] : null,
    };
  });
}
