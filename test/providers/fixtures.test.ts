import { describe, expect, it } from 'vitest';
import { PROVIDER_SLUGS } from '../../src/providers/index.js';
import { expectedOf, loadFixtures, normalise, runStream, withLineEnds } from './helpers.js';

const fixtures = loadFixtures();

describe('fixtures', () => {
  it('cover every provider with a non-streaming body, a stream and an error body', () => {
    for (const slug of PROVIDER_SLUGS) {
      const mine = fixtures.filter((f) => f.slug === slug);
      expect(
        mine.some((f) => f.kind === 'json' && f.expected.usage),
        slug,
      ).toBe(true);
      expect(
        mine.some((f) => f.kind !== 'json'),
        slug,
      ).toBe(true);
      expect(
        mine.some((f) => f.kind === 'json' && f.expected.error),
        slug,
      ).toBe(true);
    }
  });
});

for (const f of fixtures.filter((x) => x.kind === 'json')) {
  describe(`${f.slug}/${f.file}`, () => {
    it('gives the hand-worked usage', () => {
      const r = f.provider.usageFromJson(JSON.parse(f.bytes.toString('utf8')), f.expected.request);
      expect(normalise(r)).toEqual(expectedOf(f.expected));
    });
  });
}

for (const f of fixtures.filter((x) => x.kind !== 'json')) {
  const format = f.kind === 'ndjson' ? 'ndjson' : 'sse';
  describe(`${f.slug}/${f.file}`, () => {
    const req = f.expected.request;
    const whole = runStream(f.provider, req, format, [f.bytes]);

    it('gives the hand-worked usage in one read', () => {
      expect(normalise(whole.acc.result())).toEqual(expectedOf(f.expected));
      expect(whole.framer.dropped).toBe(0);
      if (f.expected.text !== undefined) expect(whole.acc.streamedText()).toBe(f.expected.text);
    });

    it('gives the same result for every split into two reads', () => {
      const want = normalise(whole.acc.result());
      const text = whole.acc.streamedText();
      for (let i = 0; i <= f.bytes.length; i++) {
        const { acc } = runStream(f.provider, req, format, [f.bytes.subarray(0, i), f.bytes.subarray(i)]);
        const got = normalise(acc.result());
        if (JSON.stringify(got) !== JSON.stringify(want) || acc.streamedText() !== text) {
          expect({ split: i, got, text: acc.streamedText() }).toEqual({ split: i, got: want, text });
        }
      }
    });

    it('gives the same result one byte at a time', () => {
      const reads = Array.from({ length: f.bytes.length }, (_, i) => f.bytes.subarray(i, i + 1));
      const { acc } = runStream(f.provider, req, format, reads);
      expect(normalise(acc.result())).toEqual(normalise(whole.acc.result()));
      expect(acc.streamedText()).toBe(whole.acc.streamedText());
    });

    for (const eol of ['\n', '\r\n', '\r'] as const) {
      it(`gives the same result with ${JSON.stringify(eol)} line ends, whole and split`, () => {
        const bytes = withLineEnds(f.bytes, eol);
        const { acc } = runStream(f.provider, req, format, [bytes]);
        expect(normalise(acc.result())).toEqual(expectedOf(f.expected));
        for (let i = 0; i <= bytes.length; i += 7) {
          const split = runStream(f.provider, req, format, [bytes.subarray(0, i), bytes.subarray(i)]);
          expect(normalise(split.acc.result())).toEqual(expectedOf(f.expected));
        }
      });
    }

    it('gives the same result without the trailing blank line (flush)', () => {
      const trimmed = Buffer.from(f.bytes.toString('latin1').replace(/[\r\n]+$/, ''), 'latin1');
      const { acc } = runStream(f.provider, req, format, [trimmed]);
      expect(normalise(acc.result())).toEqual(expectedOf(f.expected));
    });
  });
}
