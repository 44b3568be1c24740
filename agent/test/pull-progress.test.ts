import t from 'tap';
import { PullProgress, type PullEvent } from '../src/docker/pull-progress.js';

/**
 * A pull's stream as Docker sends it (`docker pull` of a two-layer image whose first layer the
 * machine holds), on a clock of our own: the lines say layers done, bytes and rate, once a second.
 */
t.test('args: a pull summed into lines at most once a second, then its summary', async (t) => {
  const MiB = 1024 * 1024;
  const progress = new PullProgress('registry/app@sha256:abc', 0);
  const at = (ms: number, event: PullEvent) => progress.event(event, ms);
  t.equal(at(10, { status: 'Pulling from app', id: 'sha256:abc' }), null, 'the repository line is not a layer');
  t.equal(at(20, { status: 'Already exists', id: 'aaa' }), null);
  t.equal(at(30, { status: 'Pulling fs layer', id: 'bbb' }), null);
  t.equal(at(400, { status: 'Downloading', id: 'bbb', progressDetail: { current: 2 * MiB, total: 10 * MiB } }), null, 'not yet a second since the start');
  t.equal(
    at(1000, { status: 'Downloading', id: 'bbb', progressDetail: { current: 5 * MiB, total: 10 * MiB } }),
    'pulling registry/app@sha256:abc: 1 of 2 layers done, 5.0 MiB of 10.0 MiB (50 %) fetched, 5.0 MiB/s',
  );
  t.equal(at(1500, { status: 'Downloading', id: 'bbb', progressDetail: { current: 8 * MiB, total: 10 * MiB } }), null, 'half a second after the last line');
  t.equal(at(1600, { status: 'Download complete', id: 'bbb' }), null);
  t.equal(at(1900, { status: 'Extracting', id: 'bbb', progressDetail: { current: 1, total: 30 * MiB } }), null, 'extracting counts no fetched bytes');
  t.equal(at(2100, { status: 'Pull complete', id: 'bbb' }), 'pulling registry/app@sha256:abc: 2 of 2 layers done, 10.0 MiB of 10.0 MiB (100 %) fetched, 4.8 MiB/s');
  t.equal(at(2200, { status: 'Digest: sha256:abc' }), null);
  t.equal(progress.summary(2500), 'pulled registry/app@sha256:abc in 2500 ms: 2 of 2 layers done, 10.0 MiB of 10.0 MiB (100 %) fetched, 4.0 MiB/s');
});

t.test('args: sizes known only for the layers that started say so', async (t) => {
  const progress = new PullProgress('r', 0);
  progress.event({ status: 'Pulling fs layer', id: 'a' }, 0);
  progress.event({ status: 'Pulling fs layer', id: 'b' }, 0);
  t.equal(progress.event({ status: 'Downloading', id: 'a', progressDetail: { current: 512, total: 2048 } }, 1000), 'pulling r: 0 of 2 layers done, 512 B fetched (of 2.0 KiB in the layers sized so far), 512 B/s');
});

t.test('args: a pull of layers the machine holds says there was nothing to fetch', async (t) => {
  const progress = new PullProgress('r', 0);
  t.equal(progress.event({ status: 'Pulling from app', id: 'r' }, 5), null);
  t.equal(progress.event({ status: 'Digest: sha256:abc' }, 6), null);
  t.equal(progress.summary(40), 'pulled r in 40 ms: no layer to fetch: the machine holds every one');
});
