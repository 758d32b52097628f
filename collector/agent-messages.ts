/** Where an agent's message belongs: its capture id and point, whatever its kind; its events as the point's. */
import type { PacketEvent } from '../common/event';
import type { AgentMessage } from './hub-types';

export function captureIdOf(m: AgentMessage): string {
  switch (m.kind) {
    case 'events':
      return m.batch.captureId;
    case 'status':
      return m.status.captureId;
    case 'lost':
      return m.lost.captureId;
    case 'error':
      return m.error.captureId;
  }
}

export function pointOf(m: AgentMessage): string {
  switch (m.kind) {
    case 'events':
      return m.batch.point;
    case 'status':
      return m.status.point;
    case 'lost':
      return m.lost.point;
    case 'error':
      return m.error.point;
  }
}

/**
 * The events as the armed point's: the same array when every event already names that point, node
 * and interface (what an agent sends), else a copy in which the ones that do not are rewritten.
 */
export function ownEvents(
  events: readonly PacketEvent[],
  point: string,
  node: string | null,
  iface: string,
): readonly PacketEvent[] {
  const own = (e: PacketEvent): boolean =>
    e.point === point && (node === null || e.node === node) && e.iface === iface;
  if (events.every(own)) return events;
  return events.map((e) => (own(e) ? e : { ...e, point, node: node ?? e.node, iface }));
}
