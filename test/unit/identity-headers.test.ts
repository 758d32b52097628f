/**
 * Identity headers at the start of a request's payload (core/decode/identity-headers.ts): PROXY
 * protocol v1 and v2 (haproxy's proxy-protocol.txt examples), X-Forwarded-For and Forwarded in an
 * HTTP/1 request head, names case-insensitive; nothing in a body, a reply or a cut header.
 */
import t from 'tap';
import { identityHeadersIn, scanIdentityHead } from '../../core/decode/identity-headers';
import { framePayloadSpan } from '../../core/decode/frame';
import { tcp } from './frames';

const of = (s: string | Buffer): ReturnType<typeof identityHeadersIn> => {
  const b = typeof s === 'string' ? Buffer.from(s, 'latin1') : s;
  return identityHeadersIn(b, 0, b.length);
};

void t.test('HTTP/1: X-Forwarded-For and Forwarded, any case, only in the head', (t) => {
  t.same(
    of(
      'GET / HTTP/1.1\r\nHost: web\r\nx-forwarded-for:  203.0.113.7, 10.90.0.42 \r\nFORWARDED: for=10.90.0.42;proto=http\r\n\r\n',
    ),
    [
      { kind: 'x-forwarded-for', value: '203.0.113.7, 10.90.0.42' },
      { kind: 'forwarded', value: 'for=10.90.0.42;proto=http' },
    ],
  );
  t.same(
    of('POST /x HTTP/1.1\r\nHost: web\r\n\r\nX-Forwarded-For: 1.2.3.4\r\n'),
    [],
    'a body is not a header',
  );
  t.same(of('HTTP/1.1 200 OK\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n'), [], 'a reply is not a request');
  t.same(
    of('GET / HTTP/1.1\nX-Forwarded-For: 1.2.3.4\n\n'),
    [{ kind: 'x-forwarded-for', value: '1.2.3.4' }],
    'bare LF',
  );
  t.same(
    of('GET / HTTP/1.1\r\nX-Forwarded-For: 1.2'),
    [{ kind: 'x-forwarded-for', value: '1.2' }],
    'cut by the snaplen: what was captured',
  );
  t.same(of(`GET / HTTP/1.1\r\nX-Forwarded-For: ${'9'.repeat(500)}\r\n\r\n`)[0]?.value.length, 200);
  t.same(
    of('GET / HTTP/1.1\r\nX-Real-IP: 10.90.0.42\r\n\r\n'),
    [{ kind: 'x-real-ip', value: '10.90.0.42' }],
    "X-Real-IP (nginx's realip module)",
  );
  t.end();
});

void t.test('PROXY protocol v1 and v2, then the HTTP head after it', (t) => {
  t.same(
    of(
      'PROXY TCP4 192.0.2.1 10.244.2.5 56324 8080\r\nGET / HTTP/1.1\r\nX-Forwarded-For: 192.0.2.1\r\n\r\n',
    ),
    [
      { kind: 'proxy-v1', value: 'TCP4 192.0.2.1 10.244.2.5 56324 8080' },
      { kind: 'x-forwarded-for', value: '192.0.2.1' },
    ],
  );
  t.same(of('PROXY UNKNOWN\r\n'), [{ kind: 'proxy-v1', value: 'UNKNOWN' }]);
  // Signature, version 2 / PROXY, TCP over IPv4, 12 address bytes: 192.0.2.1:56324 -> 10.244.2.5:8080.
  const v2 = Buffer.from([
    0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a, 0x21, 0x11, 0x00, 0x0c,
    192, 0, 2, 1, 10, 244, 2, 5, 0xdc, 0x04, 0x1f, 0x90,
  ]);
  t.same(of(Buffer.concat([v2, Buffer.from('GET / HTTP/1.1\r\n\r\n')])), [
    { kind: 'proxy-v2', value: 'TCP4 192.0.2.1:56324 -> 10.244.2.5:8080' },
  ]);
  const local = Buffer.from(v2);
  local[12] = 0x20; // LOCAL command: no addresses to trust
  t.match(of(local), [{ kind: 'proxy-v2', value: /^command 0/ }]);
  t.same(of('PROXIMITY'), [], 'not a PROXY line');
  t.end();
});

void t.test("framePayloadSpan: where a frame's TCP payload lies", (t) => {
  // Ethernet[IPv4[TCP[payload]]]
  const p = tcp(0n, {
    src: '10.90.0.42',
    dst: '10.244.2.5',
    sport: 1,
    dport: 80,
    seq: 1,
    flags: 0x18,
    payload: 'GET / HTTP/1.1\r\n\r\n',
  });
  const span = framePayloadSpan(1, p.data);
  t.same(span, { start: 54, end: p.data.length, wireLength: 18 });
  t.same(
    framePayloadSpan(1, p.data.subarray(0, 60)),
    { start: 54, end: 60, wireLength: 18 },
    'cut',
  );
  t.equal(framePayloadSpan(1, p.data.subarray(0, 54)), null, 'no payload captured');
  t.end();
});

void t.test(
  'scanIdentityHead: whether the bytes hold the whole head, and where each header starts',
  (t) => {
    const head = (s: string | Buffer): ReturnType<typeof scanIdentityHead> => {
      const b = typeof s === 'string' ? Buffer.from(s, 'latin1') : s;
      return scanIdentityHead(b, 0, b.length);
    };
    const req = 'GET / HTTP/1.1\r\nHost: web\r\nX-Real-IP: 1.2.3.4\r\n';
    t.same(head(`${req}\r\n`), {
      headers: [{ kind: 'x-real-ip', value: '1.2.3.4', at: 27 }],
      complete: true,
    });
    // Every prefix of the head short of its empty line may go on; the whole head does not.
    const whole = `PROXY TCP4 192.0.2.1 10.244.2.5 56324 8080\r\n${req}\r\n`;
    for (let n = 0; n < whole.length - 1; n++)
      if (head(whole.slice(0, n)).complete) t.fail(`the first ${n} bytes said complete`);
    t.equal(head(whole).complete, true);
    const v2 = Buffer.from([
      0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a,
    ]);
    for (let n = 0; n <= v2.length; n++)
      t.equal(head(v2.subarray(0, n)).complete, false, `a v2 signature's first ${n} bytes go on`);
    // Nothing further to find: not PROXY, not an HTTP/1 request line.
    t.equal(head('HTTP/1.1 200 OK\r\n').complete, true, 'a reply');
    t.equal(head(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00])).complete, true, 'TLS');
    t.equal(head(`PROXY ${'x'.repeat(120)}`).complete, true, 'longer than any v1 line');
    t.equal(head('GET / HTT').complete, false, 'a request line being written');
    t.end();
  },
);
