/**
 * What one collector → agent command or request may hold, checked when the agent decodes it
 * (common/envelope.ts): an agent runs as root on every node and keeps a capture's command while
 * the capture lives, so a peer holding the collector's side of the link must not make it hold, pass
 * to libpcap or to `ip route get` whatever it sends. Beyond a bound the message is refused whole
 * (WIRE_MALFORMED), never cut to fit. The collector's own commands are far below: its API takes a
 * filter of 4,096 characters, 8 points, names of 32; its doctor asks an agent for ≤ 4 namespaces
 * with ≤ 3 addresses each, its conntrack query for the few tuples a flow was seen with.
 */
export const COMMAND_LIMITS = {
  /** A capture id, point name, request id or doctor target name. */
  name: 256,
  /** A capture or doctor target: a namespace path, a PID or a pod IP. */
  target: 4096,
  /** An interface name (Linux: 15 bytes; room for other spellings). */
  iface: 64,
  /** A BPF filter: four times what the collector's API takes. */
  filter: 16_384,
  /** Namespaces one doctor request or conntrack query names. */
  targets: 16,
  /** Addresses one doctor target looks up (`ip route get`, a child process each). */
  routeTo: 16,
  /** Tuples one conntrack query matches. */
  tuples: 256,
  /** An address in a routeTo or a tuple (IPv6 text with a zone is at most ~60). */
  address: 64,
} as const;

/** The largest WebSocket message either side accepts (ws maxPayload; the collector's default). */
export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
