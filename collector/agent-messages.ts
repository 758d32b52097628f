/** Where an agent's message belongs: its capture id and point, whatever its kind. */
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
