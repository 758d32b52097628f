/**
 * libpcap open failures → HoptraceError, shared by the live sources (cap-source.ts,
 * native-source.ts) so both report the same codes with the same wording.
 */
import { readFileSync } from 'node:fs';
import { HoptraceError } from '../../common/errors';
import type { CaptureSpec } from './source';

/** Interface names from /proc/net/dev (this process's namespace), without libpcap's pseudo-devices. */
export function listKernelInterfaces(): string[] {
  try {
    return readFileSync('/proc/net/dev', 'utf8')
      .split('\n')
      .slice(2)
      .map((l) => l.split(':')[0]?.trim() ?? '')
      .filter((n) => n !== '');
  } catch {
    return [];
  }
}

/** CAPTURE_NO_INTERFACE, listing the interfaces this namespace does have. */
export function noInterface(spec: CaptureSpec, where: string): HoptraceError {
  const have = [...listKernelInterfaces(), 'any'];
  return new HoptraceError(
    'CAPTURE_NO_INTERFACE',
    `no interface '${spec.iface}'; this namespace has: ${have.join(', ')}`,
    { where, hint: 'pick one of the listed interfaces (or "any")' },
  );
}

/** CAPTURE_BAD_FILTER quoting libpcap's message and the filter. */
export function badFilter(spec: CaptureSpec, libpcapMessage: string, where: string): HoptraceError {
  return new HoptraceError(
    'CAPTURE_BAD_FILTER',
    `libpcap: ${libpcapMessage}; filter '${spec.filter ?? ''}'`,
    {
      where: `${where} interface ${spec.iface}`,
      hint: 'check the expression with tcpdump -d; syntax in pcap-filter(7)',
    },
  );
}

/** CAPTURE_OPEN_FAILED with libpcap's message and a hint for permission problems. */
export function openFailed(
  spec: CaptureSpec,
  libpcapMessage: string,
  where: string,
): HoptraceError {
  return new HoptraceError('CAPTURE_OPEN_FAILED', `libpcap: ${libpcapMessage}`, {
    where: `${where} interface ${spec.iface}`,
    hint: /permission|not permitted/i.test(libpcapMessage)
      ? "opening a packet socket needs CAP_NET_RAW: add NET_RAW to the agent container's securityContext.capabilities (deploy/base/agent.yaml)"
      : 'check the interface is up and usable with tcpdump -i',
  });
}
