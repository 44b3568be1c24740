import t from 'tap';
import { inCidr } from '@gpufarm/shared/node';
import { checkAnswers, decideTarget, DEFAULT_EGRESS_PORTS, parseAuthority } from '../src/egress/decision.js';
import { formatEgressEvent, parseEgressLine } from '../src/egress/events.js';

const policy = { allow: ['api.example.com', 'Files.Example.ORG'], ports: DEFAULT_EGRESS_PORTS };

t.test('default: an allowlisted name on 443 or 80 is allowed, case and a trailing dot ignored', async (t) => {
  t.same(decideTarget('api.example.com:443', policy), { allowed: true, name: 'api.example.com', port: 443 });
  t.same(decideTarget('API.example.com.:80', policy), { allowed: true, name: 'api.example.com', port: 80 });
  t.same(decideTarget('files.example.org:443', policy), { allowed: true, name: 'files.example.org', port: 443 });
});

t.test('behavior: each refusal has its reason', async (t) => {
  const cases: [string, string][] = [
    ['other.example.com:443', 'not_allowed'],
    ['sub.api.example.com:443', 'not_allowed'],
    ['example.com:443', 'not_allowed'],
    ['api.example.com:22', 'port'],
    ['api.example.com:8443', 'port'],
    ['10.0.0.5:443', 'ip_literal'],
    ['93.184.216.34:443', 'ip_literal'],
    ['2130706433:443', 'ip_literal'],
    ['[::1]:443', 'ip_literal'],
    ['[2606:4700::1111]:443', 'ip_literal'],
    ['localhost:443', 'not_public'],
    ['metadata.google.internal:80', 'not_public'],
    ['printer.local:443', 'not_public'],
    ['api.example.com', 'bad_target'],
    ['api.example.com:0', 'bad_target'],
    ['api.example.com:70000', 'bad_target'],
    ['', 'bad_target'],
    ['/index.html', 'bad_target'],
  ];
  for (const [authority, reason] of cases) {
    const d = decideTarget(authority, policy);
    t.equal(d.allowed ? 'allowed' : d.reason, reason, authority);
  }
});

t.test('behavior: a name on the list that is not public is still refused', async (t) => {
  const d = decideTarget('db.internal:443', { allow: ['db.internal'], ports: [443] });
  t.equal(d.allowed ? 'allowed' : d.reason, 'not_public');
});

t.test('behavior: checkAnswers refuses a name when any answer is forbidden', async (t) => {
  t.same(checkAnswers(['93.184.216.34', '2606:2800:220:1::1']), { allowed: true, addresses: ['93.184.216.34', '2606:2800:220:1::1'] });
  const cases: [string[], RegExp][] = [
    [['10.0.0.5'], /10\.0\.0\.5 \(private network/],
    [['93.184.216.34', '127.0.0.1'], /127\.0\.0\.1 \(loopback\)/],
    [['169.254.169.254'], /cloud metadata/],
    [['100.64.0.1'], /carrier-grade NAT/],
    [['fd00:ec2::254'], /cloud metadata/],
    [['::ffff:192.168.0.1'], /IPv4-mapped 192\.168\.0\.1/],
    [['fe80::1'], /link-local/],
    [['ff02::1'], /multicast/],
    [['240.0.0.1'], /reserved/],
  ];
  for (const [answers, detail] of cases) {
    const d = checkAnswers(answers);
    t.equal(d.allowed, false, answers.join(' '));
    if (!d.allowed) {
      t.equal(d.reason, 'private_answer');
      t.match(d.detail, detail);
    }
  }
  t.match(checkAnswers([]), { allowed: false, reason: 'no_answer' });
});

t.test('args: parseAuthority', async (t) => {
  t.same(parseAuthority('a.example.com:443'), { host: 'a.example.com', port: 443 });
  t.same(parseAuthority('[::1]:80'), { host: '[::1]', port: 80 });
  t.equal(parseAuthority('::1:80'), null);
  t.equal(parseAuthority('a.example.com:'), null);
});

t.test('args: inCidr', async (t) => {
  t.equal(inCidr('172.18.0.3', '172.18.0.0/16'), true);
  t.equal(inCidr('172.19.0.3', '172.18.0.0/16'), false);
  t.equal(inCidr('10.1.2.3', '0.0.0.0/0'), true);
  t.equal(inCidr('fe80::1', '172.18.0.0/16'), false);
  t.equal(inCidr('172.18.0.3', 'nonsense'), false);
  t.equal(inCidr('2001:db9:1:2::5', '2001:db9:1:2::/64'), true);
  t.equal(inCidr('2001:db9:1:3::5', '2001:db9:1:2::/64'), false);
  t.equal(inCidr('::ffff:11.0.0.9', '11.0.0.0/24'), true, 'IPv4-mapped: judged as IPv4');
  t.equal(inCidr('11.0.0.9', '2001:db9::/32'), false);
});

t.test('behavior: checkAnswers refuses the machine\'s own public networks and documentation 3fff::/20', async (t) => {
  t.match(checkAnswers(['203.0.113.7'], []), { allowed: false, detail: /documentation/ });
  t.match(checkAnswers(['11.0.0.9'], ['11.0.0.0/24']), { allowed: false, reason: 'private_answer', detail: "the name resolves to 11.0.0.9 (this machine's own network 11.0.0.0/24)" });
  t.match(checkAnswers(['::ffff:11.0.0.9'], ['11.0.0.0/24']), { allowed: false, detail: /own network/ });
  t.match(checkAnswers(['2001:db9:1:2::1'], ['2001:db9:1:2::/64']), { allowed: false, detail: /own network 2001:db9:1:2::\/64/ });
  t.same(checkAnswers(['11.0.1.9'], ['11.0.0.0/24']), { allowed: true, addresses: ['11.0.1.9'] });
  t.match(checkAnswers(['3fff:0:1::1']), { allowed: false, detail: /documentation 3fff::\/20/ });
});

t.test('behavior: decision lines round-trip and read as system lines', async (t) => {
  const allowed = { egress: 'allowed', id: 1, name: 'api.example.com', port: 443, address: '93.184.216.34' } as const;
  t.same(parseEgressLine(JSON.stringify(allowed)), allowed);
  t.equal(parseEgressLine('hello'), null);
  t.equal(parseEgressLine('{"egress": broken'), null);
  t.equal(formatEgressEvent(allowed), 'egress allowed api.example.com:443 (connection 1 to 93.184.216.34)');
  t.equal(
    formatEgressEvent({ egress: 'refused', name: '10.0.0.5', port: 443, reason: 'ip_literal', detail: 'IP addresses are refused' }),
    'egress refused 10.0.0.5:443 (ip_literal): IP addresses are refused',
  );
  t.equal(
    formatEgressEvent({ egress: 'closed', id: 1, name: 'api.example.com', port: 443, address: '93.184.216.34', bytesOut: 10, bytesIn: 20 }),
    'egress closed api.example.com:443 (connection 1): 10 bytes sent, 20 bytes received',
  );
  t.equal(
    formatEgressEvent({ egress: 'closed', id: 2, name: 'api.example.com', port: 443, address: '93.184.216.34', bytesOut: 1, bytesIn: 2, endedBy: 'bytes' }),
    "egress closed api.example.com:443 (connection 2): 1 bytes sent, 2 bytes received; cut: the job's byte budget is spent",
  );
});
