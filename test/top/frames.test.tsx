/**
 * Frames drawn by the Ink components from a fixed data set, at 80×24 and 160×40, compared with
 * the checked-in frames in ./frames (UPDATE_FRAMES=1 rewrites them after a deliberate change).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Box } from 'ink';
import { render } from 'ink-testing-library';
import { describe, expect, it } from 'vitest';
import { toUnits } from '../../src/money.js';
import { bucketsFrom, deriveFigures, type Figures, type Snapshot, type TopEvent } from '../../cli/top/derive.js';
import type { FrameState } from '../../cli/top/layout.js';
import { TopView } from '../../cli/top/view.js';

const NOW = Date.parse('2026-11-24T12:30:30Z');
const MODELS: [string, string][] = [
  ['openai', 'gpt-4o-mini'],
  ['anthropic', 'claude-sonnet-4-20250514'],
  ['groq', 'llama-3.3-70b-versatile'],
  ['gemini', 'gemini-2.5-flash'],
];
const TEAMS = ['search', 'ads', 'growth'];

/** 240 calls over the last hour, deterministic: costs, statuses, latencies and tags vary. */
const events: TopEvent[] = Array.from({ length: 240 }, (_, i) => {
  const n = 239 - i; // oldest first
  const [provider, model] = MODELS[n % 4]!;
  return {
    id: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
    recordedUs: (NOW - n * 15_000) * 1000,
    timeMs: NOW - n * 15_000 - 1200,
    provider,
    model,
    status: n % 23 === 0 ? 429 : 200,
    inputTokens: String(800 + n * 13),
    outputTokens: String(120 + (n % 7) * 40),
    cost: toUnits(`0.${String(1000 + ((n * 7919) % 9000)).padStart(4, '0')}1234`),
    usageSource: n % 9 === 0 ? 'estimated' : 'provider',
    unpriced: n % 31 === 0,
    latencyMs: 300 + ((n * 37) % 2500),
    tags: { team: TEAMS[n % 3]!, env: 'prod', ...(n % 2 ? { feature: 'autocomplete-suggestions' } : {}) },
  };
});

const snapshot: Snapshot = {
  account: 'acme',
  plan: 'pro',
  accounts: ['acme', 'beta'],
  nowMs: NOW,
  intervalS: 1,
  windowS: 60,
  month: { spend: '412.34567891', requests: '48210', budget: '500', hard_cap: true, levels_fired: [50, 80] },
  byModel: [
    { provider: 'anthropic', model: 'claude-sonnet-4-20250514', spend: '250.12000000', requests: '12000' },
    { provider: 'openai', model: 'gpt-4o-mini', spend: '100.00000001', requests: '30000' },
    { provider: 'gemini', model: 'gemini-2.5-flash', spend: '62.22567890', requests: '6210' },
  ],
  tagKey: 'team',
  tagKeys: ['env', 'feature', 'team'],
  byTag: [
    { value: 'search', spend: '300.00000000', requests: '30000' },
    { value: 'ads', spend: '100.34567891', requests: '15000' },
    { value: null, spend: '12.00000000', requests: '3210' },
  ],
  buckets: bucketsFrom(events),
  events,
  tailSize: 100,
};
const figures = deriveFigures(snapshot);

function frame(state: FrameState, shown: Figures = figures): string {
  const app = render(
    <Box width={state.width} flexShrink={0}>
      <TopView figures={shown} state={state} color={false} />
    </Box>,
  );
  const text = app.lastFrame() ?? '';
  app.unmount();
  return (
    text
      .split('\n')
      .map((l) => l.trimEnd())
      .join('\n') + '\n'
  );
}

function matches(name: string, text: string): void {
  const path = join(import.meta.dirname, 'frames', name);
  if (process.env.UPDATE_FRAMES === '1' || !existsSync(path)) writeFileSync(path, text);
  expect(text).toBe(readFileSync(path, 'utf8'));
}

describe('meter top frames', () => {
  it('fits 80×24: every line within 80 columns, 23 lines (Ink redraws a full-height frame by clearing the screen)', () => {
    const text = frame({ width: 80, height: 24 });
    const lines = text.trimEnd().split('\n');
    expect(lines).toHaveLength(23);
    for (const l of lines) expect([...l].length).toBeLessThanOrEqual(80);
    // names shortened so rows stay apart: the provider prefix dropped, a snapshot date dropped,
    // or cut in the middle (both ends stay)
    expect(text).toContain('claude-sonnet-4 ');
    expect(text).toContain('llama-3.…rsatile');
    expect(text).not.toMatch(/anthropic\/claude-…/);
    matches('top-80x24.txt', text);
  });

  it('uses the room of 160×40: longer names, every tag, more rows', () => {
    const text = frame({ width: 160, height: 40 });
    const lines = text.trimEnd().split('\n');
    expect(lines).toHaveLength(39);
    expect(lines.some((l) => [...l].length > 120)).toBe(true);
    expect(text).toContain('claude-sonnet-4-20250514');
    matches('top-160x40.txt', text);
  });

  it('at 80 columns, keeps whole what would be cut: no tags yet, a reached cap, two look-alike models', () => {
    const narrow = deriveFigures({
      ...snapshot,
      month: { ...snapshot.month, spend: '512.34567891' },
      byModel: [
        { provider: 'anthropic', model: 'claude-3-5-sonnet-20241022', spend: '2', requests: '2' },
        { provider: 'anthropic', model: 'claude-3-5-haiku-20241022', spend: '1', requests: '1' },
      ],
      tagKey: null,
      tagKeys: [],
      byTag: [],
    });
    const text = frame({ width: 80, height: 24 }, narrow);
    for (const l of text.trimEnd().split('\n')) expect([...l].length).toBeLessThanOrEqual(80);
    expect(text).toContain('hard cap REACHED (402)');
    expect(text).toContain('No tags this month');
    expect(text).toContain('claude-3-5-sonnet ');
    expect(text).toContain('claude-3-5-haiku ');
  });

  it('shows the state: paused, help, a failed refresh', () => {
    expect(frame({ width: 80, height: 24, paused: true })).toContain('PAUSED');
    const help = frame({ width: 80, height: 24, help: true });
    expect(help).toContain('month end  spend so far + the 60-minute burn rate × hours left in the month');
    expect(frame({ width: 80, height: 24, error: 'connection refused' })).toContain(
      'refresh failed: connection refused',
    );
  });
});
