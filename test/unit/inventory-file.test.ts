/**
 * An inventory keeps every entry whatever its name (common/inventory-file.ts): a node or pod named
 * "__proto__", assigned into a plain object, set its prototype instead and vanished — from the
 * attribution, from "inventory as used" and from the bundle's inventory.json, with no error.
 * Its addresses are kept in the decoder's form (common/address.ts canonicalIP).
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parseInventory } from '../../common/inventory-file';
import { runAnalyze } from '../../cli/analyze';
import { PCAPS } from './corpus';

const text = `{"nodes": {"__proto__": ["192.168.50.1"], "backend-node": ["192.168.50.2"]},
 "pods": {"__proto__": {"ip": "10.244.2.20", "node": "backend-node", "role": "backend"},
          "vpn-0": {"ip": "10.244.1.5", "node": "__proto__", "role": "vpn"},
          "constructor": {"ip": "10.244.1.6", "node": "backend-node", "role": "other"}}}`;

void t.test('names of Object.prototype members are entries like any other', (t) => {
  const inv = parseInventory(JSON.parse(text), 'inv.json');
  t.same(Object.keys(inv.nodes), ['__proto__', 'backend-node']);
  t.same(Object.keys(inv.pods), ['__proto__', 'vpn-0', 'constructor']);
  t.same(inv.nodes['__proto__'], ['192.168.50.1'], 'a lookup finds the entry');
  t.notOk('toString' in inv.nodes, 'and nothing where there is no entry');
  t.same(JSON.parse(JSON.stringify(inv)), JSON.parse(text), 'written back as read');
  t.end();
});

void t.test('addresses are kept as the decoder writes them, however they were typed', (t) => {
  const inv = parseInventory(
    {
      nodes: { n1: ['2001:DB8::1', '2001:db8:0:0:0:0:0:2', '192.168.50.1'] },
      pods: { p: { ip: '2001:0DB8::00AB', node: 'n1', role: 'backend' } },
    },
    'inv.json',
  );
  t.same(inv.nodes['n1'], ['2001:db8::1', '2001:db8::2', '192.168.50.1']);
  t.equal(inv.pods['p']?.ip, '2001:db8::ab', 'so it names the packets from 2001:db8::ab');
  t.throws(() => parseInventory({ nodes: { n1: ['not-an-ip'] } }, 'inv.json'), {
    code: 'CLI_BAD_INVENTORY',
  });
  t.end();
});

void t.test("the bundle's inventory.json is the inventory as given", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ht-inventory-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const invFile = join(dir, 'inv.json');
  writeFileSync(invFile, text);
  const backend = join(dir, 'backend.pcap');
  copyFileSync(join(PCAPS, 'zeek_http-get.pcap'), backend);
  const rd = join(dir, 'rd');
  const argv = ['--point', `decap=${join(PCAPS, 'zeek_http-get.pcap')}`, '--point'];
  argv.push(`backend=${backend}`, '--inventory', invFile, '--report-dir', rd, '--json');
  await runAnalyze(argv, () => undefined);
  const saved: unknown = JSON.parse(readFileSync(join(rd, 'inventory.json'), 'utf8'));
  t.same(saved, JSON.parse(text));
  t.match(
    readFileSync(join(rd, 'report.md'), 'utf8'),
    /inventory as used: 2 node\(s\), 3 pod\(s\)/,
  );
});
