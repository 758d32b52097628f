import t from 'tap';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import { isTLS, maskOptionsFor, zeroMask } from '../../agent/link/frame-mask';

void t.test('the zero mask is chosen only for wss: URLs', (t) => {
  t.ok(isTLS('wss://collector:8443/agent'));
  t.notOk(isTLS('ws://127.0.0.1:8080/agent'));
  t.notOk(isTLS('not a url'));
  t.equal(maskOptionsFor('wss://c/agent').generateMask, zeroMask);
  t.same(maskOptionsFor('ws://c/agent'), {}, 'cleartext keeps ws’s random key (RFC 6455 §5.3)');
  t.end();
});

void t.test('frames sent with the zero mask round-trip through a ws server', async (t) => {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await once(wss, 'listening');
  const { port } = wss.address() as AddressInfo;
  const got: Buffer[] = [];
  wss.on('connection', (s) => {
    s.on('message', (d: Buffer) => {
      got.push(Buffer.from(d));
      s.send(d);
    });
  });
  const c = new WebSocket(`ws://127.0.0.1:${String(port)}`, { generateMask: zeroMask });
  await once(c, 'open');
  const payload = Buffer.from(Array.from({ length: 70000 }, (_, i) => i & 0xff));
  c.send(payload);
  const [echo] = (await once(c, 'message')) as [Buffer];
  t.ok(Buffer.compare(got[0] ?? Buffer.alloc(0), payload) === 0, 'server received the bytes');
  t.ok(Buffer.compare(echo, payload) === 0, 'echo matches');
  c.close();
  await once(c, 'close');
  wss.close();
});
