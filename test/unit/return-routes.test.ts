/**
 * A repro's return routes read through the agents when the prober sent none: a node whose route
 * table was not read in full — cut by the collector (REPLY_LIMITS.routes, NamespaceFacts.leftOut),
 * a request refused or unanswered, no agent connected — is named in the summary's why wherever a
 * route there could have explained it, never taken for a table without the route; the routes read
 * are used as before.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { silentLogger } from '../../collector/logger';
import { readReturnRoutes } from '../../collector/return-routes-remote';
import { SessionManager } from '../../collector/sessions';
import { CaptureStore } from '../../collector/store';
import { HoptraceError } from '../../common/errors';
import { emptyNamespaceFacts, type NamespaceFacts, type RouteEntry } from '../../common/wire';
import { returnRoutesOf } from '../../core/repro/return-routes';
import {
  summarizeRepro,
  type ProbeReport,
  type ProbeVerdict,
  type ReturnRoute,
  type ServedBy,
  type TimelineRow,
} from '../../core/repro/repro-core';
import type { FakeHub } from './collector-fixtures';
import { ADDR, CLIENT } from './fixtures-events';
import { LAB_REPRO, labReproHub } from './repro-fixtures';

const route = (dst: string, gateway: string, dev = 'eth0'): RouteEntry => ({
  dst,
  gateway,
  dev,
  type: '',
  prefsrc: '',
  flags: [],
});

/** A node namespace's facts with these routes; `leftOut`: what the collector did not keep. */
function nodeFacts(node: string, routes: RouteEntry[], leftOut?: number): NamespaceFacts {
  return {
    ...emptyNamespaceFacts({ name: 'node', target: '' }, node, 4),
    routes,
    ...(leftOut === undefined
      ? {}
      : {
          leftOut: [{ part: 'routes', detail: `routes: ${leftOut} left out (at most 16384 kept)` }],
        }),
  };
}

/** The agents answer doctor requests: `answer` per agent id, a refusal, or silence. */
function answerDoctor(
  hub: FakeHub,
  answer: Record<string, NamespaceFacts[] | 'refuse' | 'silent'>,
): void {
  hub.onSend = (agentId, cmd) => {
    if (cmd.kind !== 'doctorRequest') return;
    const a = answer[agentId] ?? 'silent';
    if (a === 'silent') return;
    const node = hub.list.find((x) => x.agentId === agentId)?.node ?? '';
    const requestId = cmd.doctorRequest.requestId;
    setImmediate(() => {
      hub.reply({
        kind: 'doctorReport',
        agentId,
        report:
          a === 'refuse'
            ? {
                requestId,
                agentId,
                node,
                facts: [],
                errorCode: 'AGENT_BUSY',
                message: 'too many requests',
              }
            : { requestId, agentId, node, facts: a },
      });
    });
  };
}

const probe = (id: string, atMs: number, ok: boolean): ProbeReport => ({
  probeId: id,
  sport: 40000 + (atMs % 1000),
  startedAtMs: atMs,
  endedAtMs: atMs + 50,
  ok,
  httpCode: ok ? '200' : null,
  error: ok ? null : 'curl exit 7: could not connect',
});

void t.test(
  'a repro whose route tables were read in part or not at all says so in its why',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'ht-return-routes-'));
    t.teardown(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const hub = labReproHub();
    const sessions = new SessionManager({
      hub,
      store: new CaptureStore({ dir, fsync: false }),
      logger: silentLogger(),
      frames: false,
    });
    t.teardown(() => sessions.close());
    // The VPN node's table is cut before any route toward the client (the one that would name
    // the deleted pod may be past the bound); the backend node's agent refuses the request.
    answerDoctor(hub, {
      'a-vpn': [nodeFacts('vpn-node', [route('default', '192.168.50.254')], 5)],
      'a-web': 'refuse',
    });
    const repros = sessions.repros;
    const v = await repros.create(LAB_REPRO);
    const T = Date.now();
    repros.addProbe(v.id, probe('p1', T, true));
    repros.addMark(v.id, { kind: 'deleted', atMs: T + 100, detail: 'vpn-pod deleted' });
    repros.addProbe(v.id, probe('p2', T + 200, false));
    const done = await repros.finishReadingRoutes(v.id, []);
    const why = done?.summary?.why ?? '';
    t.match(why, /^the path did not come back: no replacement pod appeared/);
    t.match(
      why,
      /; whether a return route still points at the deleted pod is not known \(not all return routes were read\): /,
    );
    t.match(
      why,
      /node vpn-node's route table was read only in part \(routes: 5 left out \(at most 16384 kept\)\)/,
    );
    t.match(
      why,
      /node backend-node's route table was not read \(AGENT_BUSY: agent a-web: refused the doctor request: too many requests\)/,
    );
  },
);

void t.test(
  'readReturnRoutes: routes read are kept, every table not read in full named',
  async (t) => {
    const hub = labReproHub();
    hub.addAgent('a-gone', 'gone-node', []);
    hub.setConnected('a-gone', false);
    const asked: string[] = [];
    const requests = {
      doctor: (agentId: string) => {
        asked.push(agentId);
        if (agentId === 'a-web')
          return Promise.reject(
            new HoptraceError(
              'DOCTOR_NO_AGENT',
              `agent ${agentId} did not answer the doctor request in time`,
            ),
          );
        return Promise.resolve({
          requestId: 'q',
          agentId,
          node: 'vpn-node',
          facts: [
            nodeFacts('vpn-node', [
              route('default', '192.168.50.254'),
              route('10.90.0.0/24', ADDR.vpnPod),
              route('10.96.0.0/12', '', 'kube-ipvs0'),
            ]),
          ],
        });
      },
    };
    const read = await readReturnRoutes(
      hub.agents(),
      requests,
      ['vpn-node', 'gone-node', 'far-node'],
      ['a-web'],
      CLIENT,
    );
    t.same(asked.sort(), ['a-vpn', 'a-web'], 'only connected agents are asked');
    t.same(read.routes, [{ node: 'vpn-node', dst: '10.90.0.0/24', via: ADDR.vpnPod, dev: 'eth0' }]);
    t.same(read.unread, [
      { node: 'gone-node', detail: 'not read (no agent of that node is connected)' },
      { node: 'far-node', detail: 'not read (no agent of that node is connected)' },
      {
        node: 'backend-node',
        detail: 'not read (DOCTOR_NO_AGENT: agent a-web did not answer the doctor request in time)',
      },
    ]);
  },
);

void t.test('returnRoutesOf: a table cut, unread, or absent is a gap; a whole one is not', (t) => {
  const whole = returnRoutesOf(
    'n',
    [nodeFacts('n', [route('10.90.0.0/16', '10.0.0.1'), route('10.91.0.0/16', '10.0.0.2')])],
    CLIENT,
  );
  t.same(whole, {
    routes: [{ node: 'n', dst: '10.90.0.0/16', via: '10.0.0.1', dev: 'eth0' }],
    unread: [],
  });
  const cut = returnRoutesOf('n', [nodeFacts('n', [route('10.90.0.0/16', '10.0.0.1')], 7)], CLIENT);
  t.equal(cut.routes.length, 1, 'a route read in a table read in part is still a route read');
  t.same(cut.unread, [
    { node: 'n', detail: 'read only in part (routes: 7 left out (at most 16384 kept))' },
  ]);
  const failed: NamespaceFacts = {
    ...nodeFacts('n', []),
    errorCode: 'DOCTOR_READ_FAILED',
    message: 'ip route: exit 1',
    unread: ['routes'],
  };
  t.same(returnRoutesOf('n', [failed], CLIENT).unread, [
    { node: 'n', detail: 'not read (ip route: exit 1)' },
  ]);
  const other = returnRoutesOf('n', [{ ...nodeFacts('n', []), family: 6 }], CLIENT);
  t.same(other.unread, [{ node: 'n', detail: 'not read (the agent read IPv6 routes, not IPv4)' }]);
  t.same(returnRoutesOf('n', [], CLIENT).unread, [
    { node: 'n', detail: 'not read (the agent answered with no facts of its namespace)' },
  ]);
  t.end();
});

const served = (epoch: number, ip: string): ServedBy => ({
  epoch,
  name: `vpn-${epoch}`,
  ip,
  node: 'vpn-node',
});
const OLD = served(1, '10.244.1.10');
const NEW = served(2, '10.244.1.11');

function row(n: number, at: number, verdict: ProbeVerdict, ok: boolean, by: ServedBy): TimelineRow {
  return {
    probeId: `p${n}`,
    sport: 40000 + n,
    startedAtMs: at,
    offsetMs: at,
    servedBy: by,
    verdict,
    ok,
    backendSrc: null,
    detail: '',
    lossesInFlight: [],
  };
}

void t.test('the why names the gaps only where a route could have explained it', (t) => {
  const input = {
    marks: [{ kind: 'deleted' as const, atMs: 1000, detail: 'deleted' }],
    attachments: [
      { served: OLD, addresses: [OLD.ip], attachedAtMs: 0 },
      { served: NEW, addresses: [NEW.ip], attachedAtMs: 1500 },
    ],
    endMs: 3000,
  };
  const routesUnread = [
    { node: 'vpn-node', detail: 'read only in part (routes: 5 left out (at most 16384 kept))' },
  ];
  const before = row(1, 0, 'preserved', true, OLD);
  const down = [before, row(2, 2000, 'no-return', false, NEW)];
  const stale = { node: 'vpn-node', dst: '10.90.0.0/24', via: OLD.ip, dev: null };
  const why = (rows: TimelineRow[], routes: ReturnRoute[], unread = routesUnread): string =>
    summarizeRepro({ ...input, rows, routes, routesUnread: unread }).why;
  t.notMatch(why(down, [stale]), /not all return routes/, 'a stale route seen stands on its own');
  t.match(why(down, [stale]), /still points at 10\.244\.1\.10/);
  t.match(
    why(down, []),
    /^the path did not come back through vpn-2 .*; whether a return route still points at the deleted pod is not known \(not all return routes were read\): node vpn-node's route table was read only in part \(routes: 5 left out/,
  );
  t.match(
    why([before, row(2, 2000, 'preserved', true, NEW)], []),
    /work again \(preserved\); whether a return route points at an address the replacement took over is not known/,
  );
  t.notMatch(
    why([before, row(2, 2000, 'vpn-pod', true, NEW)], []),
    /not all return routes/,
    'no return route is needed when the VPN pod masquerades',
  );
  t.notMatch(why(down, [], []), /not all return routes/, 'every table read whole');
  t.end();
});
