/**
 * One copy of each repeated string. Events that crossed a thread boundary (structured clone) or
 * were decoded from the wire carry their own copy of the same point, node, interface, link type
 * and addresses; holding 400,000 of them, one copy each saves ~140 B an event (measured: 566 →
 * 428 B). Bounded: past `max` distinct strings (a scan's addresses) new ones are kept as given.
 */
export class StringInterner {
  private readonly table = new Map<string, string>();

  constructor(private readonly max = 65_536) {}

  get size(): number {
    return this.table.size;
  }

  /** Forgets every string (the holder let go of what shared them). */
  clear(): void {
    this.table.clear();
  }

  of(s: string): string {
    const had = this.table.get(s);
    if (had !== undefined) return had;
    if (this.table.size < this.max) this.table.set(s, s);
    return s;
  }
}
