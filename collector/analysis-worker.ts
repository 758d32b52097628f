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
import type { PacketEvent } from '../common/event';
import { analyzeEvents, isUsefulEvent } from '../core/report/analyze';
import type { OffloadReply, OffloadRequest } from './analysis-offload';

const sessions = new Map<string, Map<string, PacketEvent[]>>();

function onRequest(m: OffloadRequest): OffloadReply | null {
  switch (m.type) {
    case 'add': {
      let points = sessions.get(m.id);
      if (points === undefined) sessions.set(m.id, (points = new Map<string, PacketEvent[]>()));
      let list = points.get(m.point);
      if (list === undefined) points.set(m.point, (list = []));
      for (const e of m.events) if (isUsefulEvent(e)) list.push(e);
      return null;
    }
    case 'drop':
      sessions.delete(m.id);
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
