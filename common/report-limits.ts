/**
 * What the collector keeps of the text in an agent's status, error and lost reports. An agent is
 * not trusted: these strings were bounded only by the 16 MiB message, and the collector stores
 * them (session.json, repro views), logs them and renders them in reports. Decoding cuts them
 * (common/envelope.ts), in one place, rather than refusing the report: its counts and state still
 * matter. Real ones are far below: a message is a sentence, a code ours (`CAPTURE_WORKER_FAILED`),
 * a namespace `/run/netns/NAME` (NAME at most 255 bytes) or `/proc/PID/ns/net`.
 */
import { COMMAND_LIMITS } from './command-limits';
import { HELLO_LIMITS } from './hello-limits';
import { MAX_TEXT_CHARS } from './text-cut';

export const REPORT_LIMITS = {
  /** A message or reason: cut beyond, the cut says so (common/text-cut.ts). */
  text: MAX_TEXT_CHARS,
  /** An error code. */
  code: 64,
  /** The namespace path a capture runs in. */
  netns: 512,
  /** The interface and link type a status names. */
  iface: COMMAND_LIMITS.iface,
  /** The namespace's addresses a status lists: as many as a hello may list for one namespace. */
  netnsAddresses: HELLO_LIMITS.addressesPerNamespace,
  /** One address (IPv6 text with a zone is at most ~60): a longer one is not an address, dropped. */
  address: COMMAND_LIMITS.address,
} as const;
