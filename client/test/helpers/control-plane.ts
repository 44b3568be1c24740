import { freePort } from '@gpufarm/shared/node';
import type { FastifyInstance } from 'fastify';
import { GfError } from '../../src/errors.js';

/**
 * Builds a control plane whose public URL is the port it then listens on (or `publicUrl`, a
 * server in front of it), so the signed artifact URLs it hands out lead to it; answers its base URL.
 */
export async function listening<T extends { app: FastifyInstance }>(build: (env: Record<string, string>) => Promise<T>, publicUrl?: string): Promise<T & { baseUrl: string }> {
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const built = await build({ GF_PUBLIC_URL: publicUrl ?? baseUrl });
  await built.app.listen({ port, host: '127.0.0.1' });
  return { ...built, baseUrl };
}

/** The GfError a call rejects with; fails the test when it resolves or rejects with something else. */
export async function failure(call: Promise<unknown>): Promise<GfError> {
  try {
    await call;
  } catch (err) {
    if (err instanceof GfError) return err;
    throw err;
  }
  throw new Error('the call succeeded; a GfError was expected');
}
