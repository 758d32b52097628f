// agent/capabilities.ts on fixed /proc/PID/status text and nsenter's own messages: which of the
// four a process lacks, and which refusal becomes AGENT_NOT_PERMITTED naming what (no root needed).
import t from 'tap';
import {
  AGENT_CAPABILITIES,
  capabilityBits,
  missingCapabilities,
  notPermitted,
  nsenterRefusal,
} from '../../agent/capabilities';

/** A status file whose CapEff is `mask` (hex). */
const status = (mask: string): string =>
  `Name:\tnode\nUid:\t0\t0\t0\t0\nCapInh:\t0000000000000000\nCapEff:\t${mask}\nCapBnd:\t${mask}\n`;
// What the DaemonSet's container gets: NET_ADMIN 12, NET_RAW 13, SYS_PTRACE 19, SYS_ADMIN 21.
const FOUR = '0000000000283000';
const ROOT = '000001ffffffffff';

void t.test('capability masks read as bit numbers', (t) => {
  t.same(
    [...(capabilityBits(status(FOUR)) ?? [])].sort((a, b) => a - b),
    [12, 13, 19, 21],
  );
  t.same(
    AGENT_CAPABILITIES.map((c) => c.bit).sort((a, b) => a - b),
    [12, 13, 19, 21],
    'the list is that mask',
  );
  t.equal(capabilityBits(status(ROOT))?.size, 41, 'full root: 41 capabilities');
  t.equal(capabilityBits('Name:\tx\n'), null, 'no CapEff line: null, not an empty set');
  t.same([...(capabilityBits(status(FOUR), 'CapInh') ?? [])], [], 'another field by name');
  t.end();
});

void t.test('which of the four a process lacks', (t) => {
  t.same(missingCapabilities(status(FOUR)), [], 'the DaemonSet set lacks none');
  t.same(missingCapabilities(status(ROOT)), [], 'nor does full root');
  t.same(
    missingCapabilities(status('0000000000083000'))?.map((c) => c.name),
    ['SYS_ADMIN'],
    'without bit 21: SYS_ADMIN',
  );
  t.same(
    missingCapabilities(status('0000000000000000'))?.map((c) => c.name),
    ['NET_RAW', 'NET_ADMIN', 'SYS_ADMIN', 'SYS_PTRACE'],
    'none at all: every one, in the documented order',
  );
  t.equal(missingCapabilities('garbage'), null, 'unreadable: null');
  t.end();
});

void t.test("nsenter's refusals become AGENT_NOT_PERMITTED naming the capability", (t) => {
  const eperm = nsenterRefusal(
    "nsenter: reassociate to namespace 'ns/net' failed: Operation not permitted\n",
    '/run/netns/x',
  );
  t.equal(eperm?.code, 'AGENT_NOT_PERMITTED');
  t.match(eperm?.message, /CAP_SYS_ADMIN/);
  t.equal(eperm?.where, '/run/netns/x');
  // containers/common's default profile (CRI-O, Podman) answers a refused syscall with ENOSYS.
  const enosys = nsenterRefusal(
    "nsenter: reassociate to namespace 'ns/net' failed: Function not implemented",
    'w',
  );
  t.match(enosys?.message, /CAP_SYS_ADMIN/, 'ENOSYS (a seccomp profile) too');
  const eacces = nsenterRefusal('nsenter: cannot open /proc/4018/ns/net: Permission denied', 'w');
  t.match(eacces?.message, /CAP_SYS_PTRACE/, "another process's namespace file: CAP_SYS_PTRACE");
  t.equal(nsenterRefusal('nsenter: failed to execute ip: No such file or directory', 'w'), null);
  t.equal(nsenterRefusal('Cannot find device "eth9"', 'w'), null, 'anything else: null');
  t.end();
});

void t.test('lacking the capability or refused despite it: two different messages', (t) => {
  const lacking = notPermitted('SYS_ADMIN', 'setns refused', 'w', status('0000000000083000'));
  t.match(lacking.message, /setns refused: the agent lacks CAP_SYS_ADMIN \(setns/);
  t.match(lacking.hint, /add SYS_ADMIN to the agent container's securityContext\.capabilities/);
  const held = notPermitted('SYS_ADMIN', 'setns refused', 'w', status(FOUR));
  t.match(held.message, /although the agent holds CAP_SYS_ADMIN: a seccomp profile or a security/);
  t.match(held.hint, /seccompProfile/);
  t.end();
});
