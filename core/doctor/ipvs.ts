/**
 * IPVS, as kube-proxy's ipvs mode programs it: /proc/net/ip_vs of a namespace (what `ipvsadm -Ln`
 * prints, from the same kernel table). IPVS rewrites only the destination of a Service's packets
 * ("Masq" is IPVS's word for NAT forwarding: DNAT to the real server); the source is rewritten by
 * netfilter rules (kube-proxy: KUBE-POSTROUTING with mark 0x4000), which doctor reads apart.
 *
 *   IP Virtual Server version 1.2.1 (size=4096)
 *   Prot LocalAddress:Port Scheduler Flags
 *     -> RemoteAddress:Port Forward Weight ActiveConn InActConn
 *   TCP  0A60000A:0050 rr
 *     -> 0AF40205:1F90      Masq    1      0          0
 *   UDP  [fd00:0010:0096:0000:0000:0000:0000:000a]:0035 rr
 *     -> [fd00:0010:0244:0002:0000:0000:0000:0005]:1435      Masq    1      0          0
 *
 * IPv4 addresses are 8 hex digits (network order), IPv6 ones 8 groups of 4 in brackets, ports hex.
 */
import type { IpvsService } from '../../common/wire';
import { hostPort } from '../../common/endpoint';
import { formatIPv4, formatIPv6 } from '../../common/address';

const SERVICE = /^(TCP|UDP|SCTP|FWM)\s+(\S+?)(?::([0-9A-Fa-f]{4}))?\s+(\S+)/;
const REAL = /^\s+->\s+(\S+):([0-9A-Fa-f]{4})\s+(\S+)/;

/** "0A60000A" → 10.96.0.10; "[fd00:0010:…]" → RFC 5952 text (the decoder's formatters); null when neither. */
function address(hex: string): string | null {
  if (/^[0-9A-Fa-f]{8}$/.test(hex)) return formatIPv4(Buffer.from(hex, 'hex'), 0);
  const v6 = /^\[((?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4})\]$/.exec(hex);
  if (v6?.[1] === undefined) return null;
  const groups = v6[1].split(':').map((g) => g.padStart(4, '0'));
  return formatIPv6(Buffer.from(groups.join(''), 'hex'), 0);
}

/** The virtual services of /proc/net/ip_vs text; lines it does not know are skipped. */
export function parseProcIpVs(text: string): IpvsService[] {
  const out: IpvsService[] = [];
  for (const line of text.split('\n')) {
    const s = SERVICE.exec(line);
    if (s !== null) {
      const [, proto = '', addr = '', port, scheduler = ''] = s;
      // A firewall-mark service (FWM) has a mark, not an address.
      const a = proto === 'FWM' ? null : address(addr);
      out.push({
        proto: proto.toLowerCase(),
        address: a ?? addr,
        port: port === undefined ? 0 : Number.parseInt(port, 16),
        scheduler,
        reals: [],
      });
      continue;
    }
    const r = REAL.exec(line);
    const svc = out[out.length - 1];
    if (r === null || svc === undefined) continue;
    const [, addr = '', port = '0', forward = ''] = r;
    svc.reals.push({ address: address(addr) ?? addr, port: Number.parseInt(port, 16), forward });
  }
  return out;
}

/** One clause for doctor's nat summary: what IPVS holds in a namespace. */
export function ipvsText(state: 'read' | 'absent' | 'unread', services: IpvsService[]): string {
  if (state === 'absent') return 'IPVS: not in this kernel (no /proc/net/ip_vs)';
  if (state === 'unread') return 'IPVS: not read (an agent that does not read it)';
  if (services.length === 0) return 'IPVS: no virtual service';
  const shown = services.slice(0, 3).map((s) => {
    const reals = s.reals.map((r) => `${hostPort(r.address, r.port)} ${r.forward}`).join(', ');
    return `${s.proto} ${hostPort(s.address, s.port)} -> ${reals || 'no real server'}`;
  });
  const more = services.length > 3 ? ` and ${services.length - 3} more` : '';
  return `IPVS: ${services.length} virtual service${services.length === 1 ? '' : 's'} (${shown.join('; ')}${more}; IPVS rewrites only the destination)`;
}
