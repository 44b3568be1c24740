import t from 'tap';
import { isDnsName } from '../src/net/dns-name.js';
import { addressRange, isIpLiteral, isPublicDnsName, networkCidr, normalizeHost, publicNameProblem } from '../src/net/public-name.js';

t.test('default: public names and addresses pass', async (t) => {
  for (const name of ['api.example.com', 'huggingface.co', 'xn--bcher-kva.ch', 'API.Example.COM.', 'local.example.com']) {
    t.equal(publicNameProblem(name), null, name);
    t.equal(isPublicDnsName(name), true, name);
  }
  for (const address of ['93.184.216.34', '8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '2a00:1450:4001:82b::200e', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1']) {
    t.equal(addressRange(address), null, address);
  }
  t.equal(normalizeHost('API.Example.com.'), 'api.example.com');
});

t.test('behavior: every forbidden IPv4 range is named', async (t) => {
  const cases: [string, RegExp][] = [
    ['0.1.2.3', /this network/],
    ['10.1.2.3', /private network 10\.0\.0\.0\/8/],
    ['100.64.0.1', /carrier-grade NAT/],
    ['100.127.255.255', /carrier-grade NAT/],
    ['127.0.0.1', /loopback/],
    ['127.255.255.254', /loopback/],
    ['169.254.169.254', /cloud metadata/],
    ['100.100.100.200', /cloud metadata/],
    ['169.254.0.1', /link-local/],
    ['172.16.0.1', /private network 172\.16/],
    ['172.31.255.255', /private network 172\.16/],
    ['192.0.0.8', /IETF protocol/],
    ['192.0.2.1', /documentation/],
    ['198.51.100.1', /documentation/],
    ['203.0.113.9', /documentation/],
    ['192.168.1.1', /private network 192\.168/],
    ['198.18.0.1', /benchmarking/],
    ['224.0.0.1', /multicast/],
    ['239.255.255.250', /multicast/],
    ['240.0.0.1', /reserved/],
    ['255.255.255.255', /reserved/],
  ];
  for (const [address, why] of cases) t.match(addressRange(address), why, address);
  for (const edge of ['172.32.0.1', '100.128.0.1', '11.0.0.1', '172.15.255.255', '223.255.255.255', '198.20.0.1']) t.equal(addressRange(edge), null, edge);
});

t.test('behavior: every forbidden IPv6 range is named, embedded IPv4 judged as IPv4', async (t) => {
  const cases: [string, RegExp][] = [
    ['::1', /loopback/],
    ['::', /unspecified/],
    ['::ffff:127.0.0.1', /IPv4-mapped 127\.0\.0\.1, loopback/],
    ['::ffff:a9fe:a9fe', /IPv4-mapped 169\.254\.169\.254, the cloud metadata address/],
    ['::10.0.0.1', /IPv4-compatible/],
    ['64:ff9b::a00:1', /NAT64 10\.0\.0\.1, private/],
    ['64:ff9b:1::1', /local-use NAT64/],
    ['2002:c0a8:101::1', /6to4 192\.168\.1\.1, private/],
    ['2001:db8::1', /documentation/],
    ['3fff::1', /documentation 3fff::\/20/],
    ['3fff:fff:ffff::1', /documentation 3fff::\/20/],
    ['2001::1', /IETF protocol assignments/],
    ['fd00:ec2::254', /cloud metadata/],
    ['fc00::1', /unique local/],
    ['fd12:3456::1', /unique local/],
    ['fe80::1', /link-local/],
    ['fe80::1%eth0', /link-local/],
    ['fec0::1', /site-local/],
    ['ff02::1', /multicast/],
    ['100::1', /reserved/],
    ['4000::1', /reserved/],
    ['[::1]', /loopback/],
    ['example.com', /not an IP address/],
    ['', /not an IP address/],
  ];
  for (const [address, why] of cases) t.match(addressRange(address), why, address);
});

t.test('behavior: IP literals in any notation are literals, names are not', async (t) => {
  for (const host of ['10.0.0.5', '127.1', '0x7f000001', '2130706433', '017700000001', '999.1.1.1', '1.2.3.0x4', '[::1]', '::1', 'fe80::1%eth0', '2001:db8::1']) {
    t.equal(isIpLiteral(host), true, host);
    t.match(publicNameProblem(host), /IP address literal/, host);
  }
  for (const host of ['example.com', '1.example.com', 'a1', '0x.example.com']) t.equal(isIpLiteral(host), false, host);
});

t.test('behavior: names that never resolve publicly are refused', async (t) => {
  const cases: [string, RegExp][] = [
    ['localhost', /loopback/],
    ['metadata.google.internal', /metadata/],
    ['db', /single-label/],
    ['printer.local', /"\.local"/],
    ['nas.home.arpa', /"\.home\.arpa"/],
    ['10.0.0.5.nip.io', /nip\.io/],
    ['*.example.com', /not a DNS host name/],
    ['api.example.com:443', /not a DNS host name/],
  ];
  for (const [name, why] of cases) t.match(publicNameProblem(name), why, name);
  t.equal(isDnsName('api.example.com'), true);
  t.equal(isDnsName('api.example.com.'), false, 'no trailing dot in an allowlist');
  t.equal(isDnsName('1.2.3.4'), false);
});

t.test('args: networkCidr clears the host part, IPv4 and IPv6', async (t) => {
  t.equal(networkCidr('203.0.113.77', 24), '203.0.113.0/24');
  t.equal(networkCidr('11.213.7.1', 20), '11.213.0.0/20');
  t.equal(networkCidr('2001:db9:52:6a7e::1', 64), '2001:db9:52:6a7e:0:0:0:0/64');
  t.equal(networkCidr('2a01:4f8:1:2:3:4:5:6', 56), '2a01:4f8:1:0:0:0:0:0/56');
  t.equal(networkCidr('not an address', 24), null);
  t.equal(networkCidr('10.0.0.1', 33), null);
});
