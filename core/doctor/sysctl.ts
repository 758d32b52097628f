/**
 * rp_filter as `sysctl -a -r '\.rp_filter$'` prints it inside a namespace. The kernel applies
 * max(conf.all.rp_filter, conf.<iface>.rp_filter) (Documentation/networking/ip-sysctl.rst), so
 * both are kept; `default` is only what new interfaces inherit.
 */

/**
 * `key = value` lines → map. Lines that are not `key = value` are skipped. A key is anything but
 * white space: an interface name may hold any character but '/', ':' and white space (the kernel's
 * dev_valid_name), so `br+lan`, `wg@x` or even `a=b` appear in keys; the key is the longest run of
 * non-space characters before the `=` (procps prints ` = ` between key and value).
 */
export function parseSysctlOutput(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^\s*(\S+)\s*=\s*(.*?)\s*$/.exec(line);
    if (m?.[1] !== undefined && m[2] !== undefined) out.set(m[1], m[2]);
  }
  return out;
}

/**
 * rp_filter per interface from parsed sysctl output. sysctl prints a dot in an interface name
 * (VLAN `eth0.100`) as `/` (procps swaps '.' and '/' between the /proc/sys path and the key; a
 * name cannot hold '/' itself), so it is turned back.
 */
export function rpFilterValues(sysctls: Map<string, string>): { iface: string; value: number }[] {
  const out: { iface: string; value: number }[] = [];
  for (const [key, raw] of sysctls) {
    const m = /^net\.ipv4\.conf\.(.+)\.rp_filter$/.exec(key);
    const value = Number(raw);
    if (m?.[1] === undefined || !Number.isInteger(value)) continue;
    out.push({ iface: m[1].replace(/\//g, '.'), value });
  }
  return out.sort((a, b) => a.iface.localeCompare(b.iface));
}

/**
 * The value the kernel applies on `iface`: max(all, iface); null when it cannot be known (a value
 * that was not read is not 0). Only 1 is strict (fib_validate_source), so with `all` ≥ 2 the
 * maximum is loose whatever the interface's own value: then `all` is returned even without it.
 */
export function effectiveRpFilter(
  values: readonly { iface: string; value: number }[],
  iface: string,
): number | null {
  const all = values.find((v) => v.iface === 'all')?.value;
  const own = values.find((v) => v.iface === iface)?.value;
  if (all !== undefined && own !== undefined) return Math.max(all, own);
  return all !== undefined && all >= 2 ? all : null;
}
