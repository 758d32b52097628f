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

/**
 * What the collector keeps of an agent's doctor and conntrack replies (DoctorReport,
 * ConntrackReport), cut when decoded as the status text is: facts and entries are stored with a
 * capture, logged and rendered in its reports (findings, conntrack evidence), and were bounded only
 * by the 16 MiB message. Strings are cut (cutText, the cut says so) at the bounds above: free text
 * at `text`, addresses at `address`, interface names at `iface`, codes and short words at `code`.
 * A list beyond its bound keeps its first entries and says how many were left out: a doctor part
 * so cut counts as not read in full (NamespaceFacts.leftOut; no check judges it), conntrack
 * evidence is `incomplete` unless an entry kept decides it, and names the entries it did not judge
 * (core/attribute/conntrack-evidence.ts). Real replies are far below each bound.
 */
export const REPLY_LIMITS = {
  /** Namespaces one doctor report answers: as many as a request may name. */
  facts: COMMAND_LIMITS.targets,
  /** A role name, a node name (at most 253) or a doctor target as the agent echoes it. */
  name: COMMAND_LIMITS.name,
  target: COMMAND_LIMITS.target,
  /** A namespace's addresses: as many as a hello lists for one namespace. */
  addresses: HELLO_LIMITS.addressesPerNamespace,
  /** rp_filter values: one an interface (as many as a hello lists for a namespace), all, default. */
  rpFilter: HELLO_LIMITS.interfacesPerNamespace + 2,
  /** Routes of one table (`ip route show`): one per pod or peer on a node, hundreds at most. */
  routes: 16_384,
  /** The flags of one route. */
  routeFlags: 16,
  /** `ip route get` answers: one per address asked. */
  lookups: COMMAND_LIMITS.routeTo,
  /**
   * nat chains and rules: kube-proxy's iptables mode writes a chain and a few rules per Service
   * and endpoint, so 10,000 Services stay below (and within the 16 MiB message).
   */
  natChains: 65_536,
  natRules: 65_536,
  /** A chain name (`FAMILY TABLE CHAIN` for nftables: each name at most 256 bytes). */
  chain: 1024,
  /** The arguments of one rule. */
  ruleArgs: 256,
  /**
   * One argument of a rule: an nft match with an inline set of ~1,000 addresses fits. One cut
   * changes what the rule matches, so its part counts as not read in full.
   */
  ruleArg: 16_384,
  /** IPVS virtual services, and the real servers of one. */
  ipvs: 16_384,
  ipvsReals: 4096,
  /** Conntrack entries of one report: the agent lists the flow's, a few per namespace. */
  entries: 256,
  /** Errors of one conntrack report: one per namespace asked. */
  errors: COMMAND_LIMITS.targets,
} as const;
