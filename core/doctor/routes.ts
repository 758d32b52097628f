/**
 * `ip -j route show` and `ip -j route get ADDR` (iproute2 JSON) → RouteEntry. Unknown fields are
 * ignored; a malformed document yields no routes rather than an exception.
 */
import type { RouteEntry } from '../../common/wire';

const isRecord = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null;
const str = (o: Record<string, unknown>, k: string): string => {
  const v = o[k];
  return typeof v === 'string' ? v : '';
};

/** One iproute2 JSON route object → RouteEntry. */
export function routeFromJson(o: Record<string, unknown>): RouteEntry {
  const flags = Array.isArray(o['flags'])
    ? o['flags'].filter((f): f is string => typeof f === 'string')
    : [];
  // Multipath routes put the gateway in `nexthops`; the first one names the route here.
  let gateway = str(o, 'gateway');
  let dev = str(o, 'dev');
  const hops = o['nexthops'];
  if (gateway === '' && Array.isArray(hops) && isRecord(hops[0])) {
    gateway = str(hops[0], 'gateway');
    dev = dev === '' ? str(hops[0], 'dev') : dev;
  }
  const type = str(o, 'type');
  return {
    dst: str(o, 'dst'),
    gateway,
    dev,
    type: type === 'unicast' ? '' : type,
    prefsrc: str(o, 'prefsrc'),
    flags,
  };
}

/** Parses `ip -j route show` (or `ip -j route get`) output. */
export function parseIpRouteJson(text: string): RouteEntry[] {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return [];
  }
  return Array.isArray(v) ? v.filter(isRecord).map(routeFromJson) : [];
}
