/** Reads and validates an inventory JSON file (the shape in common/inventory.ts). */
import { createHash } from 'node:crypto';
import { canonicalIP } from './address';
import { readBoundedBytes, TooLargeError } from './bounded-file';
import { HoptraceError } from './errors';
import type { Inventory, InventoryPod, PodRole } from './inventory';

const ROLES: readonly PodRole[] = ['vpn', 'backend', 'proxy', 'other'];
const SHAPE =
  'expected {"nodes": {"<node>": ["<address>", ...]}, "pods": {"<pod>": {"ip", "node", "role"}}}';

function bad(path: string, detail: string): HoptraceError {
  return new HoptraceError('CLI_BAD_INVENTORY', detail, { where: path, hint: SHAPE });
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Validates parsed JSON as an Inventory; `where` names the source in errors. */
export function parseInventory(value: unknown, where: string): Inventory {
  if (!isRecord(value)) throw bad(where, 'the top level is not an object');
  // A typo ("node", "Pods") would otherwise leave the inventory silently empty.
  const unknown = Object.keys(value).filter((k) => k !== 'nodes' && k !== 'pods');
  if (unknown.length > 0)
    throw bad(
      where,
      `unknown key${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `"${k}"`).join(', ')}`,
    );
  // Without a prototype, every name is an entry: assigned into `{}`, a node or pod named
  // "__proto__" set the object's prototype instead and vanished (from the bundle's inventory.json
  // too), and a lookup of "constructor" found Object's.
  const inv: Inventory = {
    nodes: Object.create(null) as Inventory['nodes'],
    pods: Object.create(null) as Inventory['pods'],
  };
  const nodes = value['nodes'] ?? {};
  const pods = value['pods'] ?? {};
  if (!isRecord(nodes)) throw bad(where, '"nodes" is not an object');
  if (!isRecord(pods)) throw bad(where, '"pods" is not an object');
  for (const [node, addrs] of Object.entries(nodes)) {
    if (!Array.isArray(addrs)) throw bad(where, `nodes["${node}"] is not a list of addresses`);
    inv.nodes[node] = addrs.map((a, i) => {
      const ip = typeof a === 'string' ? canonicalIP(a) : null;
      if (ip === null) throw bad(where, `nodes["${node}"][${i}] is not an IP address`);
      return ip;
    });
  }
  for (const [name, pod] of Object.entries(pods)) {
    if (!isRecord(pod)) throw bad(where, `pods["${name}"] is not an object`);
    const { node, role } = pod;
    // As the decoder writes addresses, so an inventory's 2001:DB8::5 names packets from 2001:db8::5.
    const ip = typeof pod['ip'] === 'string' ? canonicalIP(pod['ip']) : null;
    if (ip === null) throw bad(where, `pods["${name}"].ip is not an IP address`);
    if (typeof node !== 'string') throw bad(where, `pods["${name}"].node is not a string`);
    const r = role ?? 'other';
    if (typeof r !== 'string' || !(ROLES as readonly string[]).includes(r)) {
      throw bad(where, `pods["${name}"].role must be one of ${ROLES.join(', ')}`);
    }
    const entry: InventoryPod = { ip, node, role: r as PodRole };
    inv.pods[name] = entry;
  }
  return inv;
}

/**
 * The most of an inventory file read. Kubernetes' largest supported cluster (150,000 pods, 5,000
 * nodes) is about 18 MB as compact JSON with cloud-style node names and 24 MB as a bundle's
 * inventory.json (indented, and given back to --inventory by the Reproduce line); 64 MiB leaves
 * room for longer names, while /dev/zero or a wrong file is refused after a fraction of a second.
 */
export const INVENTORY_MAX_BYTES = 64 << 20;

/** Reads an inventory file; every failure is CLI_BAD_INVENTORY naming the file. */
export function readInventoryFile(path: string): Inventory {
  return readInventoryInput(path).inventory;
}

/** An inventory as read, with the file's bytes' digest (a report names the file as given). */
export interface InventoryInput {
  inventory: Inventory;
  /** SHA-256 (hex) of the bytes read. */
  sha256: string;
  bytes: number;
}

/**
 * Reads an inventory file (as readInventoryFile) and hashes the bytes it parsed: a bundle's
 * inventory.json is the inventory re-serialised, so only this digest names the file given.
 */
export function readInventoryInput(path: string): InventoryInput {
  let raw: Buffer;
  try {
    raw = readBoundedBytes(path, INVENTORY_MAX_BYTES);
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    throw bad(
      path,
      `cannot read the file (${why}${e instanceof TooLargeError ? ', the most read as an inventory; 150,000 pods take about 24 MB' : ''})`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(raw.toString('utf8'));
  } catch (e) {
    throw bad(path, `not valid JSON (${e instanceof Error ? e.message : String(e)})`);
  }
  return {
    inventory: parseInventory(json, path),
    sha256: createHash('sha256').update(raw).digest('hex'),
    bytes: raw.length,
  };
}
