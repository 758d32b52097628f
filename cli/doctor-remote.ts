/**
 * The collector form of `hoptrace doctor`, shared with `kubectl hoptrace doctor`: the tunnel
 * range and the addresses checked for their family, `POST /v1/doctor` (the collector asks the
 * agents of the VPN pod's and the backend's nodes, collector/doctor-remote.ts), and the report
 * printed as text or JSON with its exit code. No agent or nsenter code is loaded here.
 */
import { familyOf, firstHost, isIP, parseCidr, type Family } from '../common/cidr';
import { HoptraceError } from '../common/errors';
import { renderDoctorText, type DoctorResult } from '../core/doctor/checks';
import type { CollectorClient } from './collector-client';
import { DOCTOR_REPORT } from './collector-replies';
import { EXIT } from './exit-codes';

/** What POST /v1/doctor takes: targets are pod IPs or NODE/PATH. */
export interface DoctorRequest {
  vpn: string;
  backend: string;
  tunnelRange?: string | undefined;
  client?: string | undefined;
  dst?: string | undefined;
  podCidrs?: string[] | undefined;
}

/** The tunnel range's family and first host (the default client); CLI_USAGE for no CIDR. */
export function parseTunnelRange(range: string): { family: Family; first: string } {
  const family = familyOf(range);
  const first = firstHost(range);
  if (family === null || first === null)
    throw new HoptraceError('CLI_USAGE', `'${range}' is not an IPv4 or IPv6 CIDR`, {
      where: '--tunnel-range',
    });
  return { family, first };
}

/** `--client` / `--dst` must be addresses of the tunnel range's family. */
export function checkFamily(flag: string, ip: string | undefined, family: Family): void {
  if (ip !== undefined && isIP(ip) !== family)
    throw new HoptraceError('CLI_USAGE', `'${ip}' is not an IPv${family} address`, {
      where: flag,
      hint: `the tunnel range is IPv${family}: the client and the destination are of its family`,
    });
}

/** The flags of a doctor request checked before anything is asked (CLI_USAGE naming the flag). */
export function checkDoctorFlags(o: Omit<DoctorRequest, 'vpn' | 'backend'>): Family {
  const { family } = parseTunnelRange(o.tunnelRange ?? '10.90.0.0/24');
  checkFamily('--client', o.client, family);
  checkFamily('--dst', o.dst, family);
  for (const c of o.podCidrs ?? [])
    if (parseCidr(c) === null)
      throw new HoptraceError('CLI_USAGE', `'${c}' is not a CIDR`, { where: '--pod-cidr' });
  return family;
}

/** POST /v1/doctor, its reply checked (its summary counted again from its findings). */
export function postDoctor(client: CollectorClient, r: DoctorRequest): Promise<DoctorResult> {
  return client.json('POST', '/v1/doctor', DOCTOR_REPORT, r);
}

/** Prints the report as `hoptrace doctor` does; 4 with an error finding, else 0. */
export function printDoctor(
  out: (line: string) => void,
  result: DoctorResult,
  json: boolean,
): number {
  out(json ? JSON.stringify(result, null, 2) : renderDoctorText(result).trimEnd());
  return result.summary.errors > 0 ? EXIT.findings : EXIT.ok;
}
