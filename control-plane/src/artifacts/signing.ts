import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Signed artifact URLs: `<publicUrl>/files/<artifactId>?expires=<unix seconds>&sig=<hmac>`,
 * the HMAC-SHA256 (base64url) of `<artifactId>.<expires>` under a per-deployment key (shared by
 * replicas through `deploymentSecret`). Anyone holding the URL may read the bytes until it
 * expires; nothing else about the caller is checked, as with an S3 presigned URL.
 */
export const SIGNED_FILE_PATH_PREFIX = '/files/';

export interface UrlSigner {
  /** A URL for `artifactId` valid for `ttlSeconds` from `now` (epoch ms, default Date.now()). */
  sign(artifactId: string, ttlSeconds: number, now?: number): { url: string; expiresAt: Date };
  /** 'ok', or why the signature is refused. */
  verify(artifactId: string, expires: string | undefined, sig: string | undefined, now?: number): 'ok' | 'expired' | 'invalid';
}

/** `publicUrl` may be a function, read at each signature: the port may be known only once the server listens. */
export function createUrlSigner(key: string, publicUrl: string | (() => string)): UrlSigner {
  const base = typeof publicUrl === 'string' ? () => publicUrl : publicUrl;
  const mac = (artifactId: string, expires: string) => createHmac('sha256', key).update(`${artifactId}.${expires}`).digest('base64url');
  return {
    sign(artifactId, ttlSeconds, now = Date.now()) {
      const expires = String(Math.floor(now / 1000) + ttlSeconds);
      return {
        url: `${base()}${SIGNED_FILE_PATH_PREFIX}${encodeURIComponent(artifactId)}?expires=${expires}&sig=${mac(artifactId, expires)}`,
        expiresAt: new Date(Number(expires) * 1000),
      };
    },
    verify(artifactId, expires, sig, now = Date.now()) {
      if (!expires || !sig || !/^\d{1,12}$/.test(expires)) return 'invalid';
      const expected = Buffer.from(mac(artifactId, expires));
      const given = Buffer.from(sig);
      if (expected.length !== given.length || !timingSafeEqual(expected, given)) return 'invalid';
      return Number(expires) * 1000 < now ? 'expired' : 'ok';
    },
  };
}

/** `url` with the value of its `sig` parameter replaced: a signed URL is a credential until it expires, and logs outlive that. */
export function withoutSignature(url: string): string {
  return url.replace(/([?&]sig=)[^&#]*/g, '$1redacted');
}
