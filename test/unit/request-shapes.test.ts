/**
 * Requests without a fresh TCP connection (issue 15): a request on a connection already open when
 * the captures started (no SYN anywhere: followed by sequence numbers, TSval and IPv4 ID), a UDP
 * request (a DNS query: followed by its payload fingerprint, length and IPv4 ID, its answer by the
 * reversed tuple) and an ICMP echo (its sequence number and data; the identifier may be
 * rewritten), with ICMP errors that quote a request shown where it died. Every case is written as
 * three pcap files and analyzed on both paths (shape-fixtures.ts `analyze`), which must agree; the
 * verdict, the hop and the keys are checked on the result.
 */
import t from 'tap';
import { analyzeFiles, type RequestSelector } from '../../cli/analyze';
import { renderReportMarkdown } from '../../core/report/report';
import { icmpEcho, icmpErrorOf, tcp, udp, type Pkt, type Seg } from './frames';
import {
  T0,
  US,
  MS,
  CLIENT,
  CLIENT2,
  SERVICE,
  VPN_NODE,
  BE_BRIDGE,
  BACKEND,
  BACKEND2,
  FORWARDER,
  INV,
  type Ends,
  REQUEST,
  type Exchange,
  established,
  dnsQuery,
  dnsAnswer,
  NAME,
  QUERY,
  dns,
  files,
  analyze,
  point,
  SEL,
  REQ,
  MASQ,
  X,
} from './shape-fixtures';

void t.test(
  'a request on an open connection through kube-proxy masquerade: kube-proxy, by sequence numbers',
  (t) => {
    const r = analyze(
      t,
      files(
        established(REQ, T0, X),
        established(REQ, T0 + 50n * US, X),
        established(MASQ, T0 + 200n * US, X),
      ),
      SEL,
    );
    if (r === null) return t.end();
    t.equal(r.verdict.layer, 'kube-proxy');
    t.same(r.verdict.rewrittenBetween, ['egress', 'backend']);
    t.equal(r.verdict.observed['backend']?.src, BE_BRIDGE);
    const be = point(r, 'backend');
    t.same(be.matchedBy, [
      'tcp-seq',
      'tsval',
      'ip-id',
      'probe-marker',
      'request-line',
      'payload-hash',
    ]);
    t.ok(be.seenReply, 'the reply at the backend is followed');
    t.ok(
      r.points.every((p) => !p.seenSyn),
      'no SYN anywhere',
    );
    t.match(point(r, 'decap').detail, /already-open connection .*the handshake was not captured/);
    t.match(be.detail, /the handshake was not captured/);
    const md = renderReportMarkdown(r, { generatedAt: '1970-01-01T00:00:00Z', inputs: [] });
    t.match(md, /handshake was not captured/, 'the report says the handshake was not captured');
    t.end();
  },
);

void t.test('retransmitted and out-of-order segments on an open connection', (t) => {
  const q2 = 'GET /second HTTP/1.1\r\nHost: svc\r\n\r\n';
  const first = established(REQ, T0, X).slice(0, 1);
  const second = (e: Ends, at: bigint): Pkt[] =>
    established(e, at, {
      seq: X.seq + REQUEST.length,
      sseq: X.sseq,
      payload: q2,
      ipId: 102,
      tsVal: 5556,
      only: ['req'],
    });
  // decap: request, its retransmission, the next segment; the backend gets them out of order.
  const decap = [
    ...first,
    ...established(REQ, T0 + 5n * MS, X).slice(0, 1),
    ...second(REQ, T0 + 6n * MS),
  ];
  const backend = [
    ...second(MASQ, T0 + 6n * MS + 10n * US),
    ...established(MASQ, T0 + 6n * MS + 20n * US, X).slice(0, 1),
  ];
  const r = analyze(t, files(decap, decap, backend), SEL);
  if (r === null) return t.end();
  t.equal(r.verdict.layer, 'kube-proxy');
  t.equal(point(r, 'decap').retransmits, 1, 'the retransmission is counted at decap');
  t.equal(
    point(r, 'backend').requestPackets,
    2,
    'both segments found at the backend, out of order',
  );
  t.end();
});

void t.test(
  'two clients share a source port at the backend after masquerade: the sequence numbers decide',
  (t) => {
    const other: Ends = { ...REQ, src: CLIENT2 };
    const y: Exchange = { seq: 0x55555, sseq: 0x66666, ipId: 300, tsVal: 9999 };
    const decap = [...established(other, T0 - 1n * MS, y), ...established(REQ, T0, X)];
    // At the backend both connections come from the node's address and port 33000 (to two pods).
    const backend = [
      ...established({ ...MASQ, dst: BACKEND2 }, T0 - 1n * MS + 200n * US, y),
      ...established(MASQ, T0 + 200n * US, X),
    ];
    const r = analyze(t, files(decap, decap, backend), SEL);
    if (r === null) return t.end();
    t.equal(r.verdict.layer, 'kube-proxy');
    t.equal(
      r.verdict.observed['backend']?.dst,
      BACKEND,
      "the client's connection, not the other one",
    );
    t.equal(point(r, 'backend').status, 'matched');
    t.end();
  },
);

void t.test(
  'without --client or --dst only a probe marker selects a request without a SYN',
  (t) => {
    const plain = { ...X, payload: 'GET /index.html HTTP/1.1\r\nHost: svc\r\n\r\n' };
    const pts = files(
      established(REQ, T0, plain),
      established(REQ, T0, plain),
      established(MASQ, T0, plain),
    );
    const run = (fast: boolean): string => {
      try {
        return JSON.stringify(
          analyzeFiles({ points: pts, inventory: INV, selector: {} }, { fast }),
        );
      } catch (e: unknown) {
        return `error: ${e instanceof Error ? e.message : String(e)}`;
      }
    };
    t.match(run(false), /error: .*without --client or --dst/, 'no marker, no selector: no request');
    t.equal(run(true), run(false));
    const marked = analyze(
      t,
      files(established(REQ, T0, X), established(REQ, T0, X), established(MASQ, T0, X)),
      {},
    );
    t.equal(marked?.verdict.layer, 'kube-proxy', 'the probe marker selects it');
    t.end();
  },
);

void t.test('a new connection wins over an open one', (t) => {
  const syn: Seg = { ...REQ, sport: 40999, seq: 0x9000, flags: 0x02, ipId: 5 };
  const decap = [...established(REQ, T0, X), tcp(T0 + 1n * MS, syn)];
  const r = analyze(
    t,
    files(decap, decap, [tcp(T0 + 1n * MS, { ...syn, src: CLIENT, dst: BACKEND, dport: 8080 })]),
    SEL,
  );
  t.equal(r?.points[0]?.seenSyn, true, 'the SYN is the request');
  t.equal(r?.verdict.observed['decap']?.sport, 40999);
  t.end();
});

void t.test('an open connection whose reply never comes back: no-return', (t) => {
  const direct: Ends = { src: CLIENT, sport: 40123, dst: BACKEND, dport: 8080 };
  const r = analyze(
    t,
    files(
      established(direct, T0, { ...X, only: ['req'] }),
      established(direct, T0, { ...X, only: ['req'] }),
      established(direct, T0, X),
    ),
    { client: CLIENT, dst: BACKEND },
  );
  t.equal(r?.verdict.layer, 'no-return');
  t.end();
});

void t.test(
  'only the reply of an open connection at a point: matched by the acknowledgement',
  (t) => {
    const r = analyze(
      t,
      files(
        established(REQ, T0, X),
        established(REQ, T0, { ...X, only: ['sack', 'reply'] }),
        established(MASQ, T0, X),
      ),
      SEL,
    );
    const eg = r === null ? undefined : point(r, 'egress');
    t.same(eg?.matchedBy, ['tcp-ack']);
    t.equal(eg?.seenRequest, false);
    t.equal(eg?.seenReply, true);
    t.end();
  },
);

const DNS_SEL: RequestSelector = { client: CLIENT, dst: SERVICE, dport: 53 };
const DQ: Ends = { src: CLIENT, sport: 5353, dst: SERVICE, dport: 53 };

void t.test(
  'a DNS query through kube-proxy DNAT + masquerade: kube-proxy, by the datagram',
  (t) => {
    const be: Ends = { src: BE_BRIDGE, sport: 5353, dst: BACKEND, dport: 5353 };
    const r = analyze(
      t,
      files(dns(DQ, T0), dns(DQ, T0 + 20n * US), dns(be, T0 + 60n * US)),
      DNS_SEL,
    );
    if (r === null) return t.end();
    t.equal(r.verdict.layer, 'kube-proxy');
    t.same(r.verdict.rewrittenBetween, ['egress', 'backend']);
    t.match(r.verdict.reason ?? '', /DNATed 10\.96\.0\.10:53 -> 10\.244\.2\.20:5353/);
    const b = point(r, 'backend');
    t.same(b.matchedBy, ['ip-id', 'probe-marker', 'payload-hash', 'dns-id', 'dns-question']);
    t.ok(
      r.points.every((p) => p.seenReply),
      'the answer is followed back at every point',
    );
    t.match(point(r, 'decap').detail, /first UDP datagram/);
    t.match(b.detail, /the same 4\d-byte datagram/);
    t.end();
  },
);

void t.test(
  'a DNS query masqueraded with a new source port (--random-fully) on the VPN node',
  (t) => {
    const eg: Ends = { src: CLIENT, sport: 5353, dst: BACKEND, dport: 5353 };
    const be: Ends = { src: VPN_NODE, sport: 61234, dst: BACKEND, dport: 5353 };
    const r = analyze(t, files(dns(eg, T0), dns(eg, T0), dns(be, T0 + 50n * US)), {
      client: CLIENT,
      dport: 5353,
    });
    t.equal(r?.verdict.layer, 'cni-masquerade');
    t.equal(r?.verdict.observed['backend']?.sport, 61234);
    t.end();
  },
);

void t.test('a DNS query whose answer never comes back: no-return', (t) => {
  const direct: Ends = { src: CLIENT, sport: 5353, dst: BACKEND, dport: 5353 };
  const r = analyze(
    t,
    files(
      dns(direct, T0, { answered: false }),
      dns(direct, T0, { answered: false }),
      dns(direct, T0),
    ),
    { client: CLIENT, dst: BACKEND, dport: 5353 },
  );
  t.equal(r?.verdict.layer, 'no-return');
  t.equal(
    r === null ? null : point(r, 'backend').seenReply,
    true,
    'the answer was seen at the backend',
  );
  t.end();
});

void t.test('a DNS query that never reaches the backend: dropped', (t) => {
  const r = analyze(
    t,
    files(dns(DQ, T0, { answered: false }), dns(DQ, T0, { answered: false }), []),
    DNS_SEL,
  );
  t.equal(r?.verdict.layer, 'dropped');
  t.end();
});

void t.test(
  'a DNS query re-sent by a forwarder (new id, same question): proxy, and its answer is no second candidate',
  (t) => {
    const fwd: Ends = { src: FORWARDER, sport: 41000, dst: BACKEND, dport: 5353 };
    const r = analyze(
      t,
      files(
        dns(DQ, T0),
        dns(DQ, T0),
        dns(fwd, T0 + 80n * US, { query: dnsQuery(0x1111, NAME), ipId: 800 }),
      ),
      DNS_SEL,
    );
    t.equal(r?.verdict.layer, 'proxy');
    t.equal(r?.verdict.observed['backend']?.src, FORWARDER);
    t.match(r?.verdict.reason ?? '', /new query/);
    t.same(r === null ? [] : point(r, 'backend').matchedBy, ['probe-marker', 'dns-question']);
    t.end();
  },
);

void t.test(
  'a forwarder re-sending a query without any marker (another name case): proxy, by the DNS question alone',
  (t) => {
    const plain = dnsQuery(0x2222, 'www.Example.com.');
    const fwd: Ends = { src: FORWARDER, sport: 41001, dst: BACKEND, dport: 5353 };
    const r = analyze(
      t,
      files(
        dns(DQ, T0, { query: plain }),
        dns(DQ, T0, { query: plain }),
        dns(fwd, T0 + 80n * US, { query: dnsQuery(0x3333, 'WWW.example.COM.'), ipId: 801 }),
      ),
      DNS_SEL,
    );
    t.equal(r?.verdict.layer, 'proxy');
    t.same(r === null ? [] : point(r, 'backend').matchedBy, ['dns-question']);
    t.end();
  },
);

const PING = Buffer.from('0123456789abcdef'.repeat(3) + 'hoptrace', 'latin1');
const echo = (
  src: string,
  dst: string,
  id: number,
  ipId: number,
  type: 0 | 8,
): Omit<Parameters<typeof icmpEcho>[1], never> => ({
  src,
  dst,
  type,
  id,
  seq: 1,
  data: PING,
  ipId,
});

/** A ping from `src` to `dst` (identifier `id`) and, unless `answered` is false, its reply. */
function ping(src: string, dst: string, t0: bigint, id: number, answered = true): Pkt[] {
  const out = [icmpEcho(t0, echo(src, dst, id, 31, 8))];
  if (answered) out.push(icmpEcho(t0 + 200n * US, echo(dst, src, id, 77, 0)));
  return out;
}

void t.test(
  'an ICMP echo through the CNI masquerade (identifier rewritten): cni-masquerade, by sequence and data',
  (t) => {
    const r = analyze(
      t,
      files(
        ping(CLIENT, BACKEND, T0, 4711),
        ping(CLIENT, BACKEND, T0 + 20n * US, 4711),
        ping(VPN_NODE, BACKEND, T0 + 50n * US, 1),
      ),
      { client: CLIENT, dst: BACKEND },
    );
    if (r === null) return t.end();
    t.equal(r.verdict.layer, 'cni-masquerade');
    t.equal(r.verdict.shape, 'icmp-echo');
    t.same(r.verdict.rewrittenBetween, ['egress', 'backend']);
    const b = point(r, 'backend');
    t.same(b.matchedBy, ['ip-id', 'icmp-echo']);
    t.equal(b.observed?.sport, 1, "the rewritten identifier is the tuple's port");
    t.ok(
      r.points.every((p) => p.seenReply),
      'the echo reply is followed back',
    );
    t.match(
      point(r, 'decap').detail,
      /first ICMP echo request 10\.90\.0\.42 -> 10\.244\.2\.20 \(identifier 4711, sequence 1/,
    );
    t.end();
  },
);

void t.test(
  'an ICMP echo whose reply never comes back: no-return; an echo reply alone is no request',
  (t) => {
    const r = analyze(
      t,
      files(
        ping(CLIENT, BACKEND, T0, 9, false),
        ping(CLIENT, BACKEND, T0, 9, false),
        ping(CLIENT, BACKEND, T0, 9),
      ),
      { client: CLIENT, dst: BACKEND },
    );
    t.equal(r?.verdict.layer, 'no-return');
    const replies = [icmpEcho(T0, echo(CLIENT, BACKEND, 9, 1, 0))];
    const pts = files(replies, replies, replies);
    t.throws(
      () =>
        analyzeFiles({ points: pts, inventory: INV, selector: { client: CLIENT } }, { fast: true }),
      /no new TCP connection/,
    );
    t.end();
  },
);

void t.test('an ICMP error quoting the reply is named where the reply died', (t) => {
  const direct: Ends = { src: CLIENT, sport: 5353, dst: BACKEND, dport: 5353 };
  const answer = udp(T0 + 300n * US, {
    src: BACKEND,
    sport: 5353,
    dst: CLIENT,
    dport: 5353,
    payload: dnsAnswer(QUERY),
  });
  const err = icmpErrorOf(T0 + 3n * MS, BE_BRIDGE, BACKEND, 3, 1, answer.data.subarray(14));
  const r = analyze(
    t,
    files(dns(direct, T0, { answered: false }), dns(direct, T0, { answered: false }), [
      ...dns(direct, T0),
      err,
    ]),
    { client: CLIENT, dst: BACKEND, dport: 5353 },
  );
  t.equal(r?.verdict.layer, 'no-return');
  t.match(
    r?.verdict.reason ?? '',
    /ICMP errors quote it at backend: ICMP destination unreachable \(host unreachable\) from 10\.244\.2\.1 about the reply/,
  );
  t.match(r === null ? '' : point(r, 'backend').detail, /host unreachable/);
  t.end();
});

void t.test(
  'an ICMP error quoting the request at the first point is kept on the fast path too (SYN request)',
  (t) => {
    const syn: Seg = { ...REQ, seq: 0x9000, flags: 0x02, ipId: 5 };
    const err = icmpErrorOf(
      T0 - 1n * MS,
      '10.90.0.1',
      CLIENT,
      3,
      13,
      tcp(T0, syn).data.subarray(14),
    );
    const r = analyze(t, files([err, tcp(T0, syn)], [tcp(T0, syn)], []), SEL);
    t.match(
      r === null ? '' : point(r, 'decap').detail,
      /communication administratively prohibited/,
    );
    t.end();
  },
);
