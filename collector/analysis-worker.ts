/**
 * The analysis worker (a worker_threads thread, started by collector/analysis-offload.ts): holds
 * the events of large captures and runs the core's analysis over them, so matching 30,000
 * connections never blocks the collector's event loop (its API, its agents' acks).
 *
 * Messages in: add {id, point, events} (the events of one stored batch), analyze {reqId, id,
 * points, inventory, selector}, drop {id}. Out: {reqId, result} (null: no request found) or
 * {reqId, error}.
 */
import { parentPort } from 'node:worker_threads';
import { isHoptraceError } from '../common/errors';
import type { PacketEvent, Tuple } from '../common/event';
import { StringInterner } from '../common/intern';
import { analyzeEvents, isUsefulEvent } from '../core/report/analyze';
import type { OffloadReply, OffloadRequest } from './analysis-offload';

const sessions = new Map<string, Map<string, PacketEvent[]>>();
/** Strings the held events share (the clone gave each event its own copies). */
const strings = new StringInterner();

function shareTuple(t: Tuple | null | undefined): void {
  if (t === null || t === undefined) return;
  t.src = strings.of(t.src);
  t.dst = strings.of(t.dst);
  t.proto = strings.of(t.proto) as Tuple['proto'];
}

/** `e` with its repeated strings replaced by the one copy the worker keeps. */
function shared(e: PacketEvent): PacketEvent {
  e.point = strings.of(e.point);
  e.node = strings.of(e.node);
  e.iface = strings.of(e.iface);
  e.linktype = strings.of(e.linktype);
  shareTuple(e.outer);
  shareTuple(e.inner);
  shareTuple(e.related);
  return e;
}

function onRequest(m: OffloadRequest): OffloadReply | null {
  switch (m.type) {
    case 'add': {
      let points = sessions.get(m.id);
      if (points === undefined) sessions.set(m.id, (points = new Map<string, PacketEvent[]>()));
      let list = points.get(m.point);
      if (list === undefined) points.set(m.point, (list = []));
      for (const e of m.events) if (isUsefulEvent(e)) list.push(shared(e));
      return null;
    }
    case 'drop':
      sessions.delete(m.id);
      // Nothing holds the strings any more: a long-lived collector's table does not fill up with
      // finished captures' addresses and stop sharing new ones.
      if (sessions.size === 0) strings.clear();
      return null;
    case 'analyze': {
      const held = sessions.get(m.id);
      const points = m.points.map((name) => ({ name, events: held?.get(name) ?? [] }));
      try {
        const result = analyzeEvents({ points, inventory: m.inventory, selector: m.selector });
        return { reqId: m.reqId, result };
      } catch (e) {
        if (isHoptraceError(e) && e.code === 'CLI_NO_REQUEST')
          return { reqId: m.reqId, result: null };
        return { reqId: m.reqId, error: e instanceof Error ? e.message : String(e) };
      }
    }
  }
}

parentPort?.on('message', (m: OffloadRequest) => {
  const reply = onRequest(m);
  if (reply !== null) parentPort?.postMessage(reply);
});
