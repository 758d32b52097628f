/**
 * `conntrack -L` lines (conntrack-tools 1.4, default and `-o extended` formats) → ConntrackEntry.
 *
 *   tcp      6 431999 ESTABLISHED src=10.90.0.42 dst=10.244.2.5 sport=40000 dport=8080 \
 *     src=10.244.2.5 dst=192.168.50.1 sport=8080 dport=40000 [ASSURED] mark=0 use=1
 *
 * The first src/dst/sport/dport group is the original direction, the second the reply. NAT is read
 * from the two, not from status flags (the default format prints none): the reply is addressed to
 * where the translated packet came from, so reply.dst ≠ orig.src means source NAT, reply.src ≠
 * orig.dst means destination NAT (nf_conntrack keeps both tuples exactly for this).
 */
import type { ConntrackEntry, ConntrackTuple } from '../../common/wire';

const L4 = new Set(['tcp', 'udp', 'sctp', 'dccp', 'udplite', 'icmp', 'icmpv6', 'gre']);
const STATES = /^[A-Z_]+$/;

/** Parses one line; null when it is not a conntrack entry (the summary line, an error). */
export function parseConntrackLine(
  line: string,
  where: { name: string; netns: string; node: string } = { name: '', netns: '', node: '' },
): ConntrackEntry | null {
  const words = line.trim().split(/\s+/);
  const protoAt = words.findIndex((w) => L4.has(w));
  if (protoAt < 0) return null;
  const proto = words[protoAt] ?? '';
  const groups: Partial<Record<'src' | 'dst' | 'sport' | 'dport', string>>[] = [{}, {}];
  let state = '';
  let dir = 0;
  for (const w of words.slice(protoAt + 1)) {
    if (!w.includes('=')) {
      if (state === '' && STATES.test(w) && dir === 0 && groups[0]?.src === undefined) state = w;
      continue;
    }
    const [k = '', v = ''] = w.split('=', 2);
    if (k !== 'src' && k !== 'dst' && k !== 'sport' && k !== 'dport') continue;
    let g = groups[dir];
    // A key seen again starts the reply group.
    if (g?.[k] !== undefined && dir === 0) g = groups[++dir];
    if (g !== undefined && g[k] === undefined) g[k] = v;
  }
  const tuple = (g: (typeof groups)[number] | undefined): ConntrackTuple | null => {
    if (g?.src === undefined || g.dst === undefined) return null;
    return {
      src: g.src,
      dst: g.dst,
      sport: Number(g.sport ?? 0),
      dport: Number(g.dport ?? 0),
    };
  };
  const orig = tuple(groups[0]);
  const reply = tuple(groups[1]);
  if (orig === null || reply === null) return null;
  return {
    ...where,
    proto,
    state,
    orig,
    reply,
    snat: reply.dst !== orig.src || reply.dport !== orig.sport,
    dnat: reply.src !== orig.dst || reply.sport !== orig.dport,
    raw: line.trim(),
  };
}

/** Parses `conntrack -L` output (one entry per line; other lines are skipped). */
export function parseConntrackOutput(
  text: string,
  where?: { name: string; netns: string; node: string },
): ConntrackEntry[] {
  return text
    .split('\n')
    .map((l) => parseConntrackLine(l, where))
    .filter((e): e is ConntrackEntry => e !== null);
}

const sameTuple = (a: ConntrackTuple, b: ConntrackTuple): boolean =>
  a.src === b.src && a.dst === b.dst && a.sport === b.sport && a.dport === b.dport;

const reversed = (t: ConntrackTuple): ConntrackTuple => ({
  src: t.dst,
  dst: t.src,
  sport: t.dport,
  dport: t.sport,
});

/**
 * Entries of the flow: the original tuple equals one the captures saw in the request direction, or
 * the reply tuple is the reverse of one (the translated side of the same entry).
 */
export function matchFlow(
  entries: readonly ConntrackEntry[],
  tuples: readonly ConntrackTuple[],
): ConntrackEntry[] {
  return entries.filter((e) =>
    tuples.some((t) => sameTuple(e.orig, t) || sameTuple(e.reply, reversed(t))),
  );
}
