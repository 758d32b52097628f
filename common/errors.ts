/**
 * The one catalog of stable error codes. Every error a user can see carries a code from here, says
 * what went wrong and where, and what to do. test/unit/errors.test.ts checks every code is
 * documented in README.md.
 */

export const ERRORS = {
  // Frame decoding (never thrown: reported on the decoded frame as `error`).
  DECODE_TRUNCATED: 'the frame ended inside a header (snaplen cut or a short packet)',
  DECODE_BAD_IP_VERSION: 'the IP version nibble does not match the header type (expected 4 or 6)',
  DECODE_BAD_IPV4_IHL: 'the IPv4 header length is below 20 bytes or beyond the packet',
  DECODE_BAD_IPV4_LENGTH: 'the IPv4 total length is smaller than its header',
  DECODE_BAD_TCP_OFFSET: 'the TCP data offset is below 20 bytes',
  DECODE_BAD_UDP_LENGTH: 'the UDP length field is below 8 bytes',
  DECODE_BAD_EXT_HEADER: 'an IPv6 extension header is malformed',
  DECODE_TOO_DEEP: 'more nested layers than the decoder follows (a loop or a hostile frame)',
  DECODE_UNSUPPORTED_LINKTYPE:
    'this link type is not decoded; the frame is counted but has no tuple',
  DECODE_BAD_TUNNEL_HEADER:
    'a tunnel header (GRE, Geneve, ERSPAN, VXLAN-GPE, NSH) has an unknown version or an impossible length',
  DECODE_INTERNAL:
    'the decoder hit an unexpected internal fault; the frame keeps what was decoded before it (please report)',
  // Capture files.
  FILE_NOT_FOUND: 'the capture file does not exist or cannot be read',
  FILE_TOO_SHORT: 'the file is shorter than a capture file header',
  FILE_BAD_MAGIC: 'the file is neither pcap nor pcapng (unknown magic number)',
  FILE_BAD_VERSION: 'the pcap file header has an unsupported version',
  FILE_BAD_LINKTYPE_FIELD: 'the pcap link-type field has reserved bits set',
  FILE_BAD_BLOCK:
    'a pcapng block is malformed (bad length or one above 16 MiB, a packet above 262144 bytes, option beyond the block, or bad trailer)',
  FILE_BAD_RECORD:
    "a packet record claims more captured bytes than libpcap's maximum (262144), whatever the header's snaplen",
  FILE_TIME_RANGE:
    "a pcapng interface's if_tsoffset puts a packet's time before 1970 or past 2^64 ns (July 2554), outside what hoptrace carries",
  FILE_WRITE: 'a report or data directory hoptrace was told to write cannot be created or written',
  FILE_STREAM:
    'standard input or a pipe was read once, by the analysis: it cannot be read again (identity headers, evidence.pcapng)',
  FILE_TRUNCATED:
    'the file ends in the middle of a record; the frames before it are used (analyze names the cut)',
  // Evidence files (offline/evidence.ts).
  EVIDENCE_FILE_CHANGED:
    'a capture file no longer holds the frames the analysis used (a frame missing, or its tuple, time or TCP fields differ): it changed since, so evidence.pcapng leaves that point out',
  // Command line.
  CLI_USAGE: 'the command line is not valid',
  CLI_BAD_POINT:
    'a --point value must be NAME=FILE, each name and file once, the first one a file (not a stream)',
  CLI_BAD_INVENTORY: 'the inventory file is not valid JSON of the documented shape',
  CLI_NO_REQUEST: 'no new TCP connection from the client was found at the first point',
  CLI_OUTPUT:
    'standard output could not be written (a full disk, a file system error); what was written before is incomplete',
  // Live capture (agent/capture).
  CAPTURE_NO_INTERFACE: 'the capture interface does not exist in the target network namespace',
  CAPTURE_BAD_FILTER: 'libpcap refused the BPF capture filter',
  CAPTURE_FILTER_UNSUPPORTED: 'this capture source cannot apply a BPF filter (file replay)',
  CAPTURE_OPEN_FAILED: 'libpcap could not open the interface (permissions, interface state)',
  CAPTURE_INTERFACE_GONE: 'the capture interface disappeared while capturing',
  CAPTURE_NAMESPACE_GONE: 'the target network namespace disappeared while capturing',
  CAPTURE_WORKER_FAILED:
    'the capture worker inside the target namespace could not start or ended unexpectedly',
  CAPTURE_BAD_DEADLINE:
    "the capture's deadline is already past by the agent's clock (its clock ahead of the collector's) or more than 7 days ahead; nothing was started",
  // Capture targets (agent/netns).
  TARGET_INVALID: 'a capture target must be a namespace path, a PID or a pod IP address',
  TARGET_NOT_FOUND: 'no network namespace matches the capture target',
  TARGET_AMBIGUOUS: 'several network namespaces hold the target pod IP',
  TARGET_OUT_OF_SCOPE:
    "a path or PID target is not a network namespace in the agent's scope (--netns-glob, and processes' namespaces unless --no-proc-scan)",
  NETNS_QUERY_FAILED: 'listing the interfaces and addresses of a network namespace failed',
  AGENT_BUSY:
    'the agent already runs as many captures (--max-captures) or answers as many requests as it takes at once; retry once one has ended',
  AGENT_NOT_PERMITTED:
    'the kernel refused the agent an operation: a Linux capability it lacks (CAP_SYS_ADMIN to enter a namespace, CAP_SYS_PTRACE to open the namespace file of another process), or a seccomp or LSM policy',
  // Collector API, sessions and data directory (collector/http.ts, sessions.ts, store.ts).
  API_BAD_REQUEST: 'the HTTP request (body, parameter or method) is not valid for this endpoint',
  API_UNAUTHORIZED: 'the API request carries no bearer token or a wrong one',
  API_METHOD_NOT_ALLOWED:
    'the endpoint exists but does not take this HTTP method (405, with Allow)',
  API_NOT_FOUND: 'no such capture or endpoint, or the capture has no report yet',
  API_NO_AGENT: 'no connected agent can reach any of the capture points',
  API_TOO_MANY_CAPTURES:
    'the collector already runs as many live captures and repros as it allows (--max-live-captures); wait for one to finish or end one',
  API_AGENT_BUSY:
    "a node the capture or repro needs already runs as many captures as its agent takes (the agent's --max-captures, said in its hello; 4 for an agent that does not say); wait for one there to finish, or raise --max-captures on that node's agent",
  AGENT_NOT_CONNECTED: 'the agent for a capture point is not connected to the collector',
  STORE_IO: 'reading or writing the collector data directory failed',
  COLLECTOR_TLS: 'the TLS certificate or key cannot be used (not PEM, or not a pair)',
  AGENT_TLS:
    "the agent's --ca, --cert or --key cannot be used (not PEM, or the key does not match the certificate)",
  COLLECTOR_LISTEN: 'the collector cannot listen on the given address',
  COLLECTOR_BUSY:
    'the collector holds as many open connections as it allows (agents included); new ones are closed at once until some close',
  COLLECTOR_UNREACHABLE: 'the collector did not answer at the given URL',
  COLLECTOR_BAD_RESPONSE: 'the collector answered with something that is not the hoptrace API',
  BUNDLE_CHECKSUM:
    "a downloaded bundle file does not match the SHA256SUMS the collector served with it (cut short or altered on the way, or changed on the collector's disk since it was written); nothing was written. Sending a bundle as one archive, the collector found such a file and cut the download after it",
  BUNDLE_ARCHIVE:
    "a bundle cannot be sent as one ustar archive (the web view's hoptrace-<id>.tar, the API's …/bundle.tar: a path beyond 100 bytes or of other than portable characters, a file of 8 GiB or more, a file whose bytes were not as many as its header said, or SHA256SUMS naming a file that is not there): the download is refused, or cut where it failed",
  // Agent <-> collector transport (common/envelope.ts, agent/link, collector/hub.ts).
  WIRE_NOT_READING:
    'the peer stopped reading what the collector sent it; the connection was cut to bound memory',
  WIRE_MALFORMED:
    'a transport message is not a valid hoptrace Envelope (garbage, text frame, no body)',
  WIRE_UNEXPECTED:
    'a valid transport message that this peer must not send now (wrong direction, before hello, no seq)',
  WIRE_UNKNOWN_KIND:
    "a well-formed transport message of a kind this version does not know (a newer peer's, in a rolling upgrade): ignored, counted and logged once, the link kept",
  WIRE_TOO_LARGE: 'a transport message exceeds the maximum payload size',
  WIRE_HELLO_TIMEOUT: 'the agent did not send hello (or the collector helloAck) in time',
  AGENT_BAD_NAME:
    "the agent's hello names a node or an agent id the collector does not take (a node name: 1-253 letters, digits, '.', '_' or '-'; an agent id: 1-260 characters)",
  HELLO_TOO_LARGE:
    "the agent's hello lists more namespaces, addresses or interfaces (or bytes) than the collector keeps; the message names which and the limit",
  AUTH_REFUSED: 'the collector refused the agent token (HTTP 401)',
  AUTH_NO_TOKEN:
    'no bearer token is configured (token file missing, empty, too large or not a regular file; variable unset)',
  AGENT_REPLACED:
    'a newer connection of the same agent id (or of the same node identity) replaced this one',
  AGENT_NODE_TAKEN:
    'another agent already speaks for this node over the shared token; retry once it is gone',
  WIRE_SEQ_EXHAUSTED:
    "the collector holds a sequence number for this agent's id too high to continue; the agent takes a new id",
  AUTH_WRONG_NODE:
    "the agent's hello names a node (or an agent id of a node) its identity may not speak for",
  AUTH_UNAVAILABLE:
    'the collector could not check the agent identity now (the Kubernetes API did not answer); the agent retries',
  HUB_HANDLER_FAILED: 'the collector could not store an agent message; the agent resends it',
  LINK_UNREACHABLE: 'the agent cannot reach the collector (connection refused, DNS, TLS)',
  LINK_HEARTBEAT_TIMEOUT: 'the peer stopped answering heartbeats; the connection is dropped',
  // Kubernetes API (collector/k8s).
  K8S_CONFIG: 'no usable Kubernetes client configuration (kubeconfig file or in-cluster account)',
  K8S_API_UNREACHABLE: 'the Kubernetes API server did not answer, or answered with an error',
  K8S_BAD_RESPONSE:
    'the Kubernetes API server (or a proxy in front of it) answered with a reply the collector or kubectl hoptrace does not read: longer than their cap (384 MiB), or with an HTTP status outside 200-599',
  K8S_FORBIDDEN:
    'the Kubernetes API refused the collector or kubectl hoptrace (HTTP 401/403): RBAC or credentials',
  K8S_POD_NOT_FOUND: 'no pod with this namespace/name is known to the Kubernetes API',
  K8S_POD_NO_IP: 'the pod exists but has no IP or node yet (pending, or finished)',
  // kubectl hoptrace (cli/kubectl).
  KUBECTL_NO_COLLECTOR:
    'no ready hoptrace collector pod in the namespace kubectl hoptrace looks in (not installed, or not ready yet)',
  KUBECTL_NO_SECRET:
    "a Secret kubectl hoptrace reads is missing or lacks its key: hoptrace-token's token, or hoptrace-tls's ca.crt when the collector serves TLS",
  KUBECTL_PORT_FORWARD:
    "the API server's port-forward to the collector pod failed or broke (refused by the kubelet, pod gone, a message past its 8 MiB bound)",
  KUBECTL_INSTALL_FAILED:
    'kubectl hoptrace install could not finish: the TLS material could not be made, or the collector and the agents were not ready in time',
  // Repro during pod deletion (collector/repro.ts, cli/repro.ts).
  REPRO_NO_WORKLOAD:
    'no connected agent reports a namespace that matches the repro workload selector',
  REPRO_FULL:
    'the repro holds as many probes (10,000) or marks (1,000) as the collector keeps for one repro; finish it (POST /v1/repros/:id/finish) and start another',
  REPRO_NOT_SUPPORTED:
    'this repro needs the Kubernetes API: a workload selector or a pod deletion on a collector started without --kubernetes/--kubeconfig, or a deletion asked for a netns (lab) workload',
  // Path checks and conntrack evidence (agent/doctor, core/doctor/checks*.ts, cli/doctor.ts).
  DOCTOR_READ_FAILED:
    'reading rp_filter, routes or the nat table inside a namespace failed; the checks are partial',
  DOCTOR_DENIED_TEST_FAILED: 'the denied-source test could not capture or send its request',
  DOCTOR_NO_AGENT: 'no connected agent can read a namespace the doctor needs',
  DOCTOR_BAD_REQUEST:
    "a doctor request or conntrack query breaks a bound of the agent's (common/command-limits.ts: a target of 4,096 characters, 16 namespaces, 16 routeTo addresses, 256 tuples, names of 256) or does not decode; the agent read nothing and said so at once",
  CONNTRACK_READ_FAILED: 'listing the conntrack table inside a namespace failed',
  AGENT_UNASKED_FACTS:
    "an agent's doctor facts or conntrack entries named a namespace the collector did not ask that agent for (another node's role): dropped, counted and logged; the rest are taken as the agent's own node's",
  // Evidence frames (agent/capture/retention*.ts, common/frames-wire.ts, collector/frames-fetch.ts).
  RETENTION_FULL:
    "the capture's retention file reached its bound before this frame; its bytes were not kept (counted)",
  RETENTION_FAILED:
    'writing the retention file failed (disk full, I/O error, a change of link type); later frames were not kept',
  RETENTION_OFF:
    'the agent kept no bytes for this capture (its retention directory unusable, or its retention budget spent)',
  RETENTION_GONE:
    "the agent no longer holds this capture's frames (released, expired after its TTL, or the agent restarted)",
  RETENTION_COUNTED:
    "the capture counted this frame into its flow's counter (per-flow counters) and kept no bytes of it; capture with perPacket to keep every frame",
  RETENTION_CUT:
    'the retention file ends before this frame (the capture worker was killed before it wrote everything out)',
  FRAMES_NOT_CAPTURED: 'no frame with this number was captured at this point',
  FRAMES_CAPTURE_RUNNING:
    'the capture at this point had not stopped when its frames were asked for',
  FRAMES_NO_AGENT:
    "the point's agent was never armed, is not connected, or did not answer the frames request in time",
  FRAMES_MALFORMED:
    'a frames request, reply or stored frames file breaks its bounds (frame numbers, counts, sizes) or answers what was not asked',
  // Lab.
  LAB_PREREQUISITE: 'a tool the lab needs is missing or the lab is not running as root',
  LAB_SETUP: 'building the namespace lab failed',
} as const;

export type ErrorCode = keyof typeof ERRORS;

/** An error a user sees: stable code, what happened, where, and what to do. */
export class HoptraceError extends Error {
  readonly code: ErrorCode;
  readonly where: string | undefined;
  readonly hint: string | undefined;
  /** What happened, without the code, where and hint the message adds around it. */
  readonly detail: string;

  constructor(code: ErrorCode, detail: string, opts: { where?: string; hint?: string } = {}) {
    const where = opts.where === undefined ? '' : `${opts.where}: `;
    const hint = opts.hint === undefined ? '' : ` (${opts.hint})`;
    super(`${code}: ${where}${detail}${hint}`);
    this.name = 'HoptraceError';
    this.code = code;
    this.where = opts.where;
    this.hint = opts.hint;
    this.detail = detail;
  }
}

/**
 * The detail inside a message that HoptraceError composed (`CODE: where: detail (hint)`), e.g.
 * one that came back over the API: wrapping it again must not repeat its code, where or hint.
 */
export function detailOf(
  message: string,
  code: string,
  where: string | undefined,
  hint: string | undefined,
): string {
  let d = message;
  const head = `${code}: ${where === undefined ? '' : `${where}: `}`;
  if (d.startsWith(head)) d = d.slice(head.length);
  else if (d.startsWith(`${code}: `)) d = d.slice(code.length + 2);
  const tail = hint === undefined ? '' : ` (${hint})`;
  if (tail !== '' && d.endsWith(tail)) d = d.slice(0, -tail.length);
  return d;
}

/** True when `e` is a HoptraceError (also across module copies). */
export function isHoptraceError(e: unknown): e is HoptraceError {
  return e instanceof Error && e.name === 'HoptraceError' && 'code' in e;
}
