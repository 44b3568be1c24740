import { createServer } from 'node:net';

/**
 * A TCP port on 127.0.0.1 that nothing listens on right now (the kernel's pick, released before
 * the caller binds it: a program started next may still lose it to another, rarely).
 */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (!address || typeof address === 'string') throw new Error('could not find a free port on 127.0.0.1');
  return address.port;
}
