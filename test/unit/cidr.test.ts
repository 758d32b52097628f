// common/cidr.ts: IPv4 and IPv6 prefixes, ranges and address text for the doctor's checks.
import t from 'tap';
import {
  covers,
  familyOf,
  firstHost,
  inCidr,
  overlaps,
  parseCidr,
  parseRange,
  podCidrAround,
} from '../../common/cidr';

void t.test('IPv4: prefixes, netmasks, bare addresses', (t) => {
  t.match(parseCidr('10.90.0.7/24'), {
    family: 4,
    first: 0x0a5a0000n,
    last: 0x0a5a00ffn,
    bits: 24,
  });
  t.match(parseCidr('10.90.0.0/255.255.255.0'), { bits: 24 });
  t.match(parseCidr('10.90.0.42'), { bits: 32, first: 0x0a5a002an });
  for (const bad of ['10.90.0.0/33', '10.90.0.0/', '10.90.0.0/255.0.255.0', 'x', '10.90.0.0/2a'])
    t.equal(parseCidr(bad), null, bad);
  t.equal(firstHost('10.90.0.0/24'), '10.90.0.1');
  t.equal(firstHost('10.90.0.42'), '10.90.0.42');
  t.equal(podCidrAround('10.244.2.5'), '10.244.0.0/16');
  t.end();
});

void t.test('IPv6: prefixes, ::, an IPv4 tail, a zone; RFC 5952 text', (t) => {
  const r = parseCidr('fd00:10:90::/64');
  t.match(r, { family: 6, bits: 64 });
  t.equal(r?.first, 0xfd000010009000000000000000000000n);
  t.equal(r?.last, 0xfd00001000900000ffffffffffffffffn);
  t.equal(parseCidr('::ffff:10.90.0.1')?.first, 0xffff0a5a0001n);
  t.equal(parseCidr('fe80::1%eth0')?.first, 0xfe800000000000000000000000000001n);
  t.equal(parseCidr('fd00::/129'), null);
  t.equal(firstHost('fd00:10:90::/64'), 'fd00:10:90::1');
  t.equal(
    firstHost('2001:db8:0:0:1::/80'),
    '2001:db8::1:0:0:1',
    'the longest zero run is compressed',
  );
  t.equal(firstHost('2001:db8:0:1::/64'), '2001:db8:0:1::1', 'a single zero group is not');
  t.equal(firstHost('::/0'), '::1');
  t.equal(podCidrAround('fd00:10:244:2::5'), 'fd00:10:244::/48');
  t.equal(podCidrAround('fd00:10:244::/48'), null, 'a prefix is not a pod address');
  t.end();
});

void t.test('ranges: a-b intervals; one family never covers nor overlaps the other', (t) => {
  const v6 = parseRange('fd00:10:90::1-fd00:10:90::ff');
  t.match(v6, { family: 6 });
  t.equal(parseRange('10.0.0.5-10.0.0.1'), null, 'reversed');
  t.equal(parseRange('10.0.0.1-fd00::1'), null, 'mixed families');
  const a = parseCidr('::/0');
  const b = parseCidr('10.0.0.0/8');
  t.ok(a !== null && b !== null && !covers(a, b) && !overlaps(a, b));
  t.ok(inCidr('fd00:10:90::42', 'fd00:10:90::/64'));
  t.notOk(inCidr('fd00:10:91::42', 'fd00:10:90::/64'));
  t.notOk(inCidr('10.90.0.42', '::/0'));
  t.ok(inCidr('10.90.0.42', '10.90.0.42'), 'a bare address is a host prefix');
  t.equal(familyOf('fd00:10:90::/64'), 6);
  t.equal(familyOf('10.90.0.0/24'), 4);
  t.equal(familyOf('nonsense'), null);
  t.end();
});
