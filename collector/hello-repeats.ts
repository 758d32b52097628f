/**
 * A hello repeated on a connection that already said hello. A real agent sends one when its
 * namespaces change (agent/link/collector-link.ts refreshHello, at most once per inventory refresh,
 * 5 s), so the collector learns a new pod without a reconnect. Whoever holds a token can send them
 * back to back, though, and every `onAgent` makes each running repro re-plan its attachment (a
 * detach and an attach, two capture commands, when the namespaces changed): 3,000 hellos made
 * 1,407 attachments. So the hub tells a repeated hello only when it changed what the collector
 * reads of the agent (anything but its spool position), and at most once per REPEAT_HELLO_EMIT_MS
 * per agent; the ones between are told once, together, when that time is up.
 */
import type { Hello } from '../common/wire';

/** The least time between two tellings of one agent's repeated hellos. */
export const REPEAT_HELLO_EMIT_MS = 1_000;

/** True when `b` says anything of the agent that `a` did not (spoolFirstSeq aside). */
export function helloChanged(a: Hello, b: Hello): boolean {
  return JSON.stringify({ ...a, spoolFirstSeq: 0 }) !== JSON.stringify({ ...b, spoolFirstSeq: 0 });
}

/** Tells one agent's changes at most once per `intervalMs`, the last ones after the wait. */
export class HelloPacer {
  private toldAtMs = -Infinity;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly tell: () => void,
    private readonly intervalMs = REPEAT_HELLO_EMIT_MS,
    private readonly nowMs: () => number = Date.now,
  ) {}

  /** The agent was told of (its first hello, a disconnection): a change waits from now. */
  told(): void {
    this.toldAtMs = this.nowMs();
    this.cancel();
  }

  /** The agent's hello changed: told now, or once the interval is up (one telling for all). */
  changed(): void {
    if (this.timer !== undefined) return;
    const wait = this.toldAtMs + this.intervalMs - this.nowMs();
    if (wait <= 0) {
      this.told();
      this.tell();
      return;
    }
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.told();
      this.tell();
    }, wait);
    this.timer.unref();
  }

  /** Nothing waiting is told (the agent is gone, the hub closes). */
  cancel(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
