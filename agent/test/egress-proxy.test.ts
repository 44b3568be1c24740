import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import t, { type Test } from 'tap';
import type { EgressEvent } from '../src/egress/events.js';
import { createEgressProxy, proxyPort, type EgressProxyOptions } from '../src/egress/server.js';

/** A TCP server on 127.0.0.1 that answers every chunk with `echo:` and the chunk. */
async function echoServer(t: Test): Promise<{ server: Server; port: number; accepted: () => number }> {
  let accepted = 0;
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    accepted++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    s.on('data', (chunk) => s.write(Buffer.concat([Buffer.from('echo:'), chunk])));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { server, port: (server.address() as AddressInfo).port, accepted: () => accepted };
}

const ANSWERS: Record<string, string[]> = {
  'private.example.com': ['10.0.0.5'],
  'meta.example.com': ['169.254.169.254'],
  'mixed.example.com': ['93.184.216.34', '127.0.0.1'],
  'loop6.example.com': ['::1'],
};

async function startProxy(t: Test, echoPort: number, options: Partial<EgressProxyOptions> = {}) {
  const events: EgressEvent[] = [];
  const lookups: string[] = [];
  const proxy = createEgressProxy(
    { policy: { allow: ['echo.example.com', 'private.example.com', 'meta.example.com', 'mixed.example.com', 'loop6.example.com', 'gone.example.com'], ports: [echoPort, 443] }, ...options },
    {
      lookup: async (name) => {
        lookups.push(name);
        const answer = ANSWERS[name];
        if (!answer) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
        return answer;
      },
      emit: (e) => events.push(e),
      fixedHosts: new Map([['echo.example.com', '127.0.0.1']]),
    },
  );
  proxy.server.listen(0, '127.0.0.1');
  await once(proxy.server, 'listening');
  t.teardown(() => proxy.close());
  return { proxy, events, lookups, port: proxyPort(proxy) };
}

/** Sends `CONNECT target` (or any request text) and resolves with the status, the bytes after the head and the socket. */
function request(port: number, text: string): Promise<{ status: number; body: string; socket: Socket }> {
  const socket = connect({ host: '127.0.0.1', port });
  socket.on('error', () => undefined);
  socket.write(text);
  return new Promise((resolve) => {
    let buffered = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buffered.subarray(0, end).toString();
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
      const rest = buffered.subarray(end + 4).toString();
      const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
      if (status !== 200 && Buffer.byteLength(rest) < length) return;
      socket.off('data', onData);
      socket.off('close', onClose);
      if (status !== 200) socket.destroy();
      resolve({ status, body: rest, socket });
    };
    const onClose = () => resolve({ status: 0, body: buffered.toString(), socket });
    socket.on('data', onData);
    socket.on('close', onClose);
  });
}

const connectTo = (port: number, target: string) => request(port, `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);

function readUntil(socket: Socket, text: string): Promise<string> {
  return new Promise((resolve) => {
    let got = '';
    const onData = (chunk: Buffer) => {
      got += chunk.toString();
      if (!got.includes(text)) return;
      socket.off('data', onData);
      resolve(got);
    };
    socket.on('data', onData);
    socket.on('close', () => resolve(got));
  });
}

async function settle(events: EgressEvent[], kind: EgressEvent['egress'], count = 1): Promise<void> {
  for (let i = 0; i < 200 && events.filter((e) => e.egress === kind).length < count; i++) await new Promise((r) => setTimeout(r, 10));
}

t.test('default: an allowlisted name is tunnelled to the address it maps to, both ways, and logged with bytes', async (t) => {
  const echo = await echoServer(t);
  const { events, port } = await startProxy(t, echo.port);
  const { status, socket } = await connectTo(port, `echo.example.com:${echo.port}`);
  t.equal(status, 200);
  socket.write('hello');
  t.equal(await readUntil(socket, 'echo:hello'), 'echo:hello');
  socket.end();
  await settle(events, 'closed');
  t.same(events, [
    { egress: 'allowed', id: 1, name: 'echo.example.com', port: echo.port, address: '127.0.0.1' },
    { egress: 'closed', id: 1, name: 'echo.example.com', port: echo.port, address: '127.0.0.1', bytesOut: 5, bytesIn: 10 },
  ]);
});

t.test('behavior: bytes sent with the CONNECT request are forwarded', async (t) => {
  const echo = await echoServer(t);
  const { port } = await startProxy(t, echo.port);
  const { status, socket, body } = await request(port, `CONNECT echo.example.com:${echo.port} HTTP/1.1\r\n\r\nearly`);
  t.equal(status, 200);
  const got = body.includes('echo:early') ? body : body + (await readUntil(socket, 'echo:early'));
  t.match(got, /echo:early/);
  socket.destroy();
});

t.test('error: refusals answer 403/405/502, open nothing and are logged', async (t) => {
  const echo = await echoServer(t);
  const { events, lookups, port } = await startProxy(t, echo.port);
  const cases: [string, number, string, RegExp][] = [
    [`other.example.com:${echo.port}`, 403, 'not_allowed', /not on the job's allowlist/],
    [`127.0.0.1:${echo.port}`, 403, 'ip_literal', /IP addresses are refused/],
    [`[::1]:${echo.port}`, 403, 'ip_literal', /IP addresses/],
    [`localhost:${echo.port}`, 403, 'not_public', /loopback/],
    ['echo.example.com:22', 403, 'port', /port 22 is not allowed/],
    [`private.example.com:${echo.port}`, 403, 'private_answer', /10\.0\.0\.5 \(private network 10\.0\.0\.0\/8\)/],
    [`meta.example.com:${echo.port}`, 403, 'private_answer', /169\.254\.169\.254 \(the cloud metadata address\)/],
    [`mixed.example.com:${echo.port}`, 403, 'private_answer', /127\.0\.0\.1 \(loopback\)/],
    [`loop6.example.com:${echo.port}`, 403, 'private_answer', /::1 \(loopback\)/],
    [`gone.example.com:${echo.port}`, 502, 'no_answer', /ENOTFOUND/],
  ];
  for (const [target, status, reason, detail] of cases) {
    const res = await connectTo(port, target);
    t.equal(res.status, status, target);
    t.match(res.body, new RegExp(`^${reason}: `), target);
    const event = events[events.length - 1];
    t.match(event, { egress: 'refused', reason, detail }, target);
  }
  t.same(lookups, ['private.example.com', 'meta.example.com', 'mixed.example.com', 'loop6.example.com', 'gone.example.com'], 'only allowlisted public names are resolved');
  t.equal(echo.accepted(), 0, 'nothing reached the target');

  const get = await request(port, `GET http://echo.example.com:${echo.port}/ HTTP/1.1\r\nHost: echo.example.com\r\n\r\n`);
  t.equal(get.status, 405);
  t.match(events[events.length - 1], { egress: 'refused', reason: 'method', name: 'echo.example.com' });
});

t.test('behavior: a target that does not answer is 502 connect_failed', async (t) => {
  const echo = await echoServer(t);
  const closedPort = echo.port;
  await new Promise<void>((r) => echo.server.close(() => r()));
  const { events, port } = await startProxy(t, closedPort);
  const res = await connectTo(port, `echo.example.com:${closedPort}`);
  t.equal(res.status, 502);
  t.match(events, [{ egress: 'refused', reason: 'connect_failed' }]);
});

t.test('behavior: tunnels at once are limited per job', async (t) => {
  const echo = await echoServer(t);
  const { proxy, events, port } = await startProxy(t, echo.port, { maxConnections: 1 });
  const first = await connectTo(port, `echo.example.com:${echo.port}`);
  t.equal(first.status, 200);
  const second = await connectTo(port, `echo.example.com:${echo.port}`);
  t.equal(second.status, 429);
  t.match(events[events.length - 1], { egress: 'refused', reason: 'connections' });
  first.socket.destroy();
  await settle(events, 'closed');
  t.equal(proxy.open, 0);
  const third = await connectTo(port, `echo.example.com:${echo.port}`);
  t.equal(third.status, 200, 'a slot frees when a tunnel closes');
  third.socket.destroy();
});

t.test('behavior: the job\'s byte budget ends the tunnel that spends it and refuses new ones', async (t) => {
  const echo = await echoServer(t);
  const { events, port } = await startProxy(t, echo.port, { maxBytes: 1000 });
  const { status, socket } = await connectTo(port, `echo.example.com:${echo.port}`);
  t.equal(status, 200);
  socket.on('error', () => undefined);
  socket.write(Buffer.alloc(800, 'a'));
  await once(socket, 'close');
  await settle(events, 'closed');
  t.match(events.find((e) => e.egress === 'closed'), { endedBy: 'bytes' });
  const next = await connectTo(port, `echo.example.com:${echo.port}`);
  t.equal(next.status, 429);
  t.match(events[events.length - 1], { egress: 'refused', reason: 'bytes' });
});

t.test('behavior: close ends every tunnel and logs it cut by the shutdown', async (t) => {
  const echo = await echoServer(t);
  const { proxy, events, port } = await startProxy(t, echo.port);
  const { status, socket } = await connectTo(port, `echo.example.com:${echo.port}`);
  t.equal(status, 200);
  socket.on('error', () => undefined);
  await proxy.close();
  await settle(events, 'closed');
  t.match(events.find((e) => e.egress === 'closed'), { endedBy: 'shutdown' });
});

t.test('behavior: past MAX_LOGGED_REFUSALS refusals are counted, not logged', async (t) => {
  const echo = await echoServer(t);
  const { events, port } = await startProxy(t, echo.port);
  for (let i = 0; i < 203; i++) await connectTo(port, `x${i}.example.com:443`);
  t.equal(events.filter((e) => e.egress === 'refused').length, 200);
  t.match(events[events.length - 1], { egress: 'note', message: /further ones are not logged/ });
});
