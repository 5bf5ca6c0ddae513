import { Writable } from 'node:stream';
import { expect, it } from 'vitest';
import { StalledReader, streamSink } from '../../src/export/run.js';

it('an export whose reader takes nothing for idleMs stops with StalledReader; one that reads goes on', async () => {
  // A writable that never takes its first chunk: 'drain' never comes.
  const stuck = new Writable({ highWaterMark: 16, write() {} });
  const sink = streamSink(stuck, { idleMs: 200 });
  await sink.write('x'.repeat(32)).then(
    () => expect.fail('a stalled reader was waited for'),
    (err: unknown) => expect(err).toBeInstanceOf(StalledReader),
  );
  const slow = new Writable({ highWaterMark: 16, write: (_c, _e, cb) => setTimeout(cb, 50) });
  const ok = streamSink(slow, { idleMs: 200 });
  for (let i = 0; i < 5; i++) await ok.write('y'.repeat(32));
});
