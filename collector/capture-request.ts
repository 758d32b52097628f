/**
 * Validation of `POST /v1/captures` bodies into a CaptureSpec. Every refusal is API_BAD_REQUEST
 * naming the field (`points[1].iface`), so a client can fix exactly what is wrong.
 */
import { isIP } from 'node:net';
import { HoptraceError } from '../common/errors';
import { parseInventory } from '../common/inventory-file';
import { parseCidr } from '../common/cidr';
import { NODE_NAME_RE } from '../common/agent-names';
import {
  DEFAULT_SETTLE_MS,
  DEFAULT_TIMEOUT_MS,
  type CaptureDoctorSpec,
  type CaptureSpec,
  type PointSpec,
} from './session';

const POINT_NAME = /^[a-z][a-z0-9-]{0,31}$/;
// Linux interface names: up to 15 bytes, no '/', ':' or whitespace ('any' is libpcap's pseudo device).
const IFACE = /^[A-Za-z0-9_.@-]{1,15}$/;
/** A Linux interface name as a capture point takes it (1-15 characters, no '/', ':' or space). */
export const isIfaceName = (s: string): boolean => IFACE.test(s);
/** The longest capture (timeoutMs) and settle time the API takes. */
export const MAX_TIMEOUT_MS = 3_600_000;
/** The shortest capture timeout the API takes. */
export const MIN_TIMEOUT_MS = 100;
const MAX_POINTS = 8;

function bad(field: string, detail: string, hint?: string): HoptraceError {
  return new HoptraceError(
    'API_BAD_REQUEST',
    detail,
    hint === undefined ? { where: field } : { where: field, hint },
  );
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

// namespace = DNS-1123 label, pod name = DNS-1123 subdomain (what the API server accepts).
const POD_REF =
  /^([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)\/([a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?)$/;

/**
 * `namespace/pod` (resolved through the Kubernetes API). A pod part that is an IPv4 address or all
 * digits stays the `NODE/IP` and `NODE/PID` forms of `hoptrace capture --point`.
 */
export function parsePodTarget(t: string): { namespace: string; name: string } | null {
  const m = POD_REF.exec(t);
  const namespace = m?.[1];
  const name = m?.[2];
  if (namespace === undefined || name === undefined) return null;
  if (isIP(name) !== 0 || /^[0-9]+$/.test(name)) return null;
  return { namespace, name };
}

/** A capture target: a pod IP, an absolute namespace path, a PID, or `namespace/pod`. */
export function isValidTarget(t: string): boolean {
  if (isIP(t) !== 0) return true;
  if (parsePodTarget(t) !== null) return true;
  if (/^[1-9][0-9]{0,9}$/.test(t)) return true;
  return t.startsWith('/') && t.length < 4096 && !t.split('/').includes('..');
}

function optString(o: Record<string, unknown>, key: string, field: string): string | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw bad(`${field}.${key}`, 'must be a string');
  return v;
}

function optInt(
  o: Record<string, unknown>,
  key: string,
  min: number,
  max: number,
): number | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
    throw bad(key, `must be an integer from ${min} to ${max}`);
  return v;
}

function parsePoint(v: unknown, i: number): PointSpec {
  const field = `points[${i}]`;
  if (!isRecord(v)) throw bad(field, 'must be an object {name, target, iface, filter?, node?}');
  for (const k of Object.keys(v)) {
    if (!['name', 'target', 'iface', 'filter', 'node'].includes(k))
      throw bad(`${field}.${k}`, 'unknown field');
  }
  const name = optString(v, 'name', field);
  if (name === undefined || !POINT_NAME.test(name))
    throw bad(`${field}.name`, 'must be lower-case letters, digits and dashes', 'e.g. "decap"');
  const target = optString(v, 'target', field);
  if (target === undefined || !isValidTarget(target)) {
    throw bad(
      `${field}.target`,
      'must be a pod IP, a namespace path, a PID or namespace/pod',
      'e.g. "10.244.1.10", "/run/netns/vpn", "1234" or "vpn/wg-0"',
    );
  }
  const iface = optString(v, 'iface', field);
  if (iface === undefined || !IFACE.test(iface))
    throw bad(`${field}.iface`, 'must be an interface name (1-15 characters)', 'e.g. "eth0"');
  const p: PointSpec = { name, target, iface };
  const filter = optString(v, 'filter', field);
  if (filter !== undefined) {
    if (filter.length > 4096) throw bad(`${field}.filter`, 'longer than 4096 characters');
    p.filter = filter;
  }
  const node = optString(v, 'node', field);
  if (node !== undefined) {
    if (!NODE_NAME_RE.test(node)) throw bad(`${field}.node`, 'is not a node name');
    if (parsePodTarget(target) !== null)
      throw bad(`${field}.node`, 'a namespace/pod target brings its node', 'leave out "node"');
    p.node = node;
  }
  return p;
}

/** The request's `doctor` part: `{tunnelRange: CIDR}`. */
function parseCaptureDoctor(v: unknown): CaptureDoctorSpec {
  const hint = 'e.g. "doctor": {"tunnelRange": "10.90.0.0/24"} (the VPN\'s tunnel range)';
  if (!isRecord(v)) throw bad('doctor', 'must be an object', hint);
  for (const k of Object.keys(v))
    if (k !== 'tunnelRange') throw bad(`doctor.${k}`, 'unknown field');
  const range = v['tunnelRange'];
  if (typeof range !== 'string' || parseCidr(range) === null)
    throw bad('doctor.tunnelRange', 'must be an IPv4 or IPv6 CIDR', hint);
  return { tunnelRange: range };
}

/** Validates a parsed JSON body and applies the defaults. */
/** A boolean field of the body; undefined when absent or null. */
function optBool(body: Record<string, unknown>, key: string, hint?: string): boolean | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw bad(key, 'must be true or false', hint);
  return v;
}

export function parseCaptureRequest(body: unknown): CaptureSpec {
  if (!isRecord(body)) throw bad('body', 'must be a JSON object');
  const known = [
    'points',
    'client',
    'dst',
    'dport',
    'timeoutMs',
    'stopOnFirstMatch',
    'settleMs',
    'inventory',
    'evidencePayload',
    'perPacket',
    'doctor',
  ];
  for (const k of Object.keys(body)) if (!known.includes(k)) throw bad(k, 'unknown field');
  const points = body['points'];
  if (!Array.isArray(points) || points.length < 2 || points.length > MAX_POINTS) {
    throw bad(
      'points',
      `must be a list of 2 to ${MAX_POINTS} capture points in path order`,
      'e.g. [{"name":"decap",…},{"name":"egress",…},{"name":"backend",…}]',
    );
  }
  const parsed = points.map(parsePoint);
  const names = new Set<string>();
  for (const p of parsed) {
    if (names.has(p.name)) throw bad('points', `point "${p.name}" is given twice`);
    names.add(p.name);
  }
  const spec: CaptureSpec = {
    points: parsed,
    timeoutMs: optInt(body, 'timeoutMs', MIN_TIMEOUT_MS, MAX_TIMEOUT_MS) ?? DEFAULT_TIMEOUT_MS,
    settleMs: optInt(body, 'settleMs', 0, MAX_TIMEOUT_MS) ?? DEFAULT_SETTLE_MS,
    stopOnFirstMatch: true,
  };
  const stop = optBool(body, 'stopOnFirstMatch');
  if (stop !== undefined) spec.stopOnFirstMatch = stop;
  const hints = {
    evidencePayload:
      'true keeps the payload bytes in evidence.pcapng (the agents retain whole frames)',
    perPacket:
      'true makes the agents send every packet as an event instead of counting long flows per flow',
  };
  if (optBool(body, 'evidencePayload', hints.evidencePayload) === true) spec.evidencePayload = true;
  if (optBool(body, 'perPacket', hints.perPacket) === true) spec.perPacket = true;
  const doctor = body['doctor'];
  if (doctor !== undefined && doctor !== null) spec.doctor = parseCaptureDoctor(doctor);
  for (const key of ['client', 'dst'] as const) {
    const v = optString(body, key, 'body');
    if (v === undefined) continue;
    if (isIP(v) === 0) throw bad(key, `"${v}" is not an IP address`);
    spec[key] = v;
  }
  const dport = optInt(body, 'dport', 1, 65535);
  if (dport !== undefined) spec.dport = dport;
  const inv = body['inventory'];
  if (inv !== undefined && inv !== null) {
    try {
      spec.inventory = parseInventory(inv, 'inventory');
    } catch (e) {
      throw bad('inventory', e instanceof Error ? e.message : String(e));
    }
  }
  return spec;
}
