import t from 'tap';
import { imageCacheKey } from '../src/image-patterns.js';

const D = `sha256:${'a'.repeat(64)}`;

t.test('imageCacheKey: one name per image, as jobs name it and as Docker lists it', async (t) => {
  const cases: Array<[string, string | null, string | null]> = [
    ['ubuntu', null, 'ubuntu:latest'],
    ['docker.io/library/ubuntu:22.04', null, 'ubuntu:22.04'],
    ['index.docker.io/pytorch/pytorch:2.3', null, 'pytorch/pytorch:2.3'],
    ['127.0.0.1:5000/gpufarm/busybox:1', null, '127.0.0.1:5000/gpufarm/busybox:1'],
    [`ghcr.io/acme/app@${D}`, null, `ghcr.io/acme/app@${D}`],
    [`ghcr.io/acme/app:1@${D}`, null, `ghcr.io/acme/app@${D}`],
    ['ghcr.io/acme/app:1', D, `ghcr.io/acme/app@${D}`],
    ['Not An Image', null, null],
  ];
  for (const [ref, digest, key] of cases) t.equal(imageCacheKey(ref, digest), key, `${ref}${digest ? ` + ${digest.slice(0, 12)}…` : ''}`);
});
