/**
 * The doctor's and the conntrack evidence's reads inside one namespace: thin shells over
 * `nsenter --net=PATH` (the agent has no setns) around the pure parsers next to this file.
 * Nothing here writes: sysctl, ip route, iptables-save / ip6tables-save, nft and conntrack are
 * only listed.
 */
import { execFile } from 'node:child_process';
import type { Family } from '../../common/cidr';
import { HoptraceError, isHoptraceError, type ErrorCode } from '../../common/errors';
import { FACT_PARTS, emptyNamespaceFacts } from '../../common/wire';
import type {
  ConntrackEntry,
  ConntrackTuple,
  DoctorTarget,
  FactPart,
  NamespaceFacts,
  RouteLookup,
} from '../../common/wire';
import { missingCapabilities, notPermitted, nsenterRefusal } from '../capabilities';
import { namespaceAddresses, type NetnsScope } from '../netns/addresses';
import { resolveTarget } from '../netns/resolve';
import { matchFlow, parseConntrackOutput } from '../../core/doctor/conntrack';
import { asLegacy, parseIptablesSave } from '../../core/doctor/iptables-save';
import { parseNftRuleset } from '../../core/doctor/nft';
import { parseProcIpVs } from '../../core/doctor/ipvs';
import { parseIpRouteJson } from '../../core/doctor/routes';
import { parseSysctlOutput, rpFilterValues } from '../../core/doctor/sysctl';

/** Where the reads run: the node's namespace file (absent = the agent's own) and the scope. */
export interface ReadContext {
  node: string;
  nodeNetns?: string | undefined;
  scope?: NetnsScope | undefined;
}

/** Tools that read netfilter through nfnetlink (CAP_NET_ADMIN) or, legacy, a raw socket too. */
const NETFILTER_TOOLS = new Set([
  'iptables-save',
  'ip6tables-save',
  'iptables-legacy-save',
  'ip6tables-legacy-save',
  'nft',
  'conntrack',
]);

/** The tools' own words for EPERM/EACCES ("Permission denied (you must be root)", …). */
const REFUSED = /you must be root|Operation not permitted|Permission denied/;

/**
 * Why `file` was refused, when it was: nsenter's refusal (CAP_SYS_ADMIN, CAP_SYS_PTRACE), or a
 * netfilter read without CAP_NET_ADMIN (legacy iptables: CAP_NET_RAW first, for its raw socket).
 */
function refusal(
  command: string,
  file: string,
  stderr: string,
  where: string,
): HoptraceError | null {
  const ns = nsenterRefusal(stderr, where);
  if (ns !== null) return ns;
  if (!NETFILTER_TOOLS.has(file) || !REFUSED.test(stderr)) return null;
  const lacking = missingCapabilities()?.map((c) => c.name) ?? [];
  const cap = file.includes('legacy') && lacking.includes('NET_RAW') ? 'NET_RAW' : 'NET_ADMIN';
  return notPermitted(cap, `${command}: ${stderr.split('\n')[0] ?? stderr}`, where);
}

/**
 * Runs `file args` in `netns` (undefined = here); resolves stdout, rejects with stderr, or with
 * AGENT_NOT_PERMITTED when the kernel refused it.
 */
function runIn(netns: string | undefined, file: string, args: string[]): Promise<string> {
  const [f, a] =
    netns === undefined ? [file, args] : ['nsenter', [`--net=${netns}`, '--', file, ...args]];
  const command = `${file} ${args.join(' ')}`;
  return new Promise((resolve, reject) => {
    execFile(f, a, { timeout: 10_000, maxBuffer: 32 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err === null) resolve(stdout);
      else {
        const text = stderr.trim() || err.message;
        reject(
          refusal(command, file, text, netns ?? '(agent namespace)') ??
            new Error(`${command}: ${text}`),
        );
      }
    });
  });
}

/** Like runIn; null when `file` is not installed (ENOENT), so an optional tool is skipped. */
async function runIfInstalled(
  netns: string | undefined,
  file: string,
  args: string[],
): Promise<string | null> {
  try {
    return await runIn(netns, file, args);
  } catch (e) {
    if (e instanceof Error && /ENOENT|No such file|not found/i.test(e.message)) return null;
    throw e;
  }
}

/** The namespace file a DoctorTarget names ('' = the node's namespace). */
async function namespaceOf(t: DoctorTarget, ctx: ReadContext): Promise<string | undefined> {
  if (t.target === '') return ctx.nodeNetns;
  return (await resolveTarget(t.target, ctx.scope ?? {})).path;
}

function failure(code: ErrorCode, e: unknown): { errorCode: string; message: string } {
  if (isHoptraceError(e)) return { errorCode: e.code, message: e.message };
  return { errorCode: code, message: `${code}: ${e instanceof Error ? e.message : String(e)}` };
}

/** The nat table's tools of one family: the nf_tables backend's and the legacy one's. */
const SAVE_TOOLS: Record<Family, { nft: string; legacy: string }> = {
  4: { nft: 'iptables-save', legacy: 'iptables-legacy-save' },
  6: { nft: 'ip6tables-save', legacy: 'ip6tables-legacy-save' },
};

/**
 * Reads the addresses of one namespace and, for `family`, its routes (and `route get` of each
 * `routeTo`), its nat rules (both iptables backends, native nftables) and, for IPv4, rp_filter
 * (Linux has none for IPv6). Never throws: a failed read leaves its part empty, lists it in
 * `unread` and sets errorCode DOCTOR_READ_FAILED (or the target's error), so the other namespaces
 * are still checked.
 */
/** What the IPVS read prints where /proc/net/ip_vs does not exist. */
const NO_IPVS = 'hoptrace: no /proc/net/ip_vs';

export async function readNamespaceFacts(
  t: DoctorTarget,
  family: Family,
  ctx: ReadContext,
): Promise<NamespaceFacts> {
  const facts: NamespaceFacts = emptyNamespaceFacts(t, ctx.node, family);
  let netns: string | undefined;
  try {
    netns = await namespaceOf(t, ctx);
    facts.netns = netns ?? '(agent namespace)';
  } catch (e) {
    return { ...facts, ...failure('TARGET_NOT_FOUND', e), unread: [...FACT_PARTS] };
  }
  const problems: string[] = [];
  const attempt = async (
    part: FactPart,
    what: string,
    step: () => Promise<void>,
  ): Promise<void> => {
    try {
      await step();
    } catch (e) {
      problems.push(`${what}: ${e instanceof Error ? e.message : String(e)}`);
      facts.unread.push(part);
    }
  };
  await attempt('addresses', 'addresses', async () => {
    facts.addresses = (await namespaceAddresses(netns)).addresses;
  });
  if (family === 4) {
    await attempt('rp_filter', 'rp_filter', async () => {
      // -e: interfaces that vanish between listing and reading are not an error.
      const out = await runIn(netns, 'sysctl', ['-e', '-a', '-r', '\\.rp_filter$']);
      facts.rpFilter = rpFilterValues(parseSysctlOutput(out));
    });
  }
  const ip = [`-${family}`, '-j', 'route'];
  await attempt('routes', 'routes', async () => {
    facts.routes = parseIpRouteJson(await runIn(netns, 'ip', [...ip, 'show']));
  });
  for (const to of t.routeTo) {
    const lookup: RouteLookup = { to, route: null, error: '' };
    try {
      lookup.route = parseIpRouteJson(await runIn(netns, 'ip', [...ip, 'get', to]))[0] ?? null;
    } catch (e) {
      // "RTNETLINK answers: Network is unreachable" is a finding, not a failed read.
      lookup.error = e instanceof Error ? e.message : String(e);
    }
    facts.lookups.push(lookup);
  }
  const tools = SAVE_TOOLS[family];
  await attempt('nat', 'nat table', async () => {
    const saved = parseIptablesSave(await runIn(netns, tools.nft, ['-t', 'nat']));
    facts.natChains.push(...saved.chains);
    facts.natRules.push(...saved.rules);
    // The other iptables backend's table is a table of its own that sees every packet too.
    const legacy = await runIfInstalled(netns, tools.legacy, ['-t', 'nat']);
    if (legacy !== null && !/\(nf_tables\)/.test(legacy)) {
      const t = asLegacy(parseIptablesSave(legacy));
      facts.natChains.push(...t.chains);
      facts.natRules.push(...t.rules);
    }
  });
  await attempt('nft', 'native nftables (nft -j list ruleset)', async () => {
    const nat = parseNftRuleset(await runIn(netns, 'nft', ['-j', 'list', 'ruleset']), family);
    facts.natChains.push(...nat.chains);
    facts.natRules.push(...nat.rules);
  });
  await attempt('ipvs', 'IPVS (/proc/net/ip_vs)', async () => {
    // /proc/net is the reading process's namespace's: read inside the target's. The file exists
    // only where the kernel has IPVS (and the module is loaded).
    const out = await runIn(netns, 'sh', [
      '-c',
      `if [ -e /proc/net/ip_vs ]; then cat /proc/net/ip_vs; else echo '${NO_IPVS}'; fi`,
    ]);
    if (out.trim() === NO_IPVS) facts.ipvsState = 'absent';
    else {
      facts.ipvs = parseProcIpVs(out);
      facts.ipvsState = 'read';
    }
  });
  if (problems.length > 0) {
    facts.errorCode = 'DOCTOR_READ_FAILED';
    facts.message = `DOCTOR_READ_FAILED: ${problems.join('; ')}`;
  }
  return facts;
}

/**
 * The conntrack entries of a flow in one namespace (`conntrack -L -p tcp`, filtered in process by
 * the tuples the captures saw). Throws CONNTRACK_READ_FAILED.
 */
export async function readConntrack(
  t: DoctorTarget,
  tuples: readonly ConntrackTuple[],
  ctx: ReadContext,
): Promise<ConntrackEntry[]> {
  let netns: string | undefined;
  try {
    netns = await namespaceOf(t, ctx);
  } catch (e) {
    if (isHoptraceError(e)) throw e;
    throw new HoptraceError('CONNTRACK_READ_FAILED', String(e), { where: t.name });
  }
  let out: string;
  try {
    out = await runIn(netns, 'conntrack', ['-L', '-p', 'tcp']);
  } catch (e) {
    if (isHoptraceError(e)) throw e;
    throw new HoptraceError('CONNTRACK_READ_FAILED', e instanceof Error ? e.message : String(e), {
      where: `${ctx.node}/${t.name}`,
      hint: 'the agent needs CAP_NET_ADMIN and conntrack-tools; nf_conntrack must be loaded',
    });
  }
  const where = { name: t.name, netns: netns ?? '(agent namespace)', node: ctx.node };
  return matchFlow(parseConntrackOutput(out, where), tuples);
}
