import { expect, it } from 'vitest';
import type { CallStart } from '../../src/metering/types.js';
import { knownModels, MAX_MODEL_LABELS, ModelLabels, OTHER_MODEL } from '../../src/metrics/model-label.js';
import { metricAttributes } from '../../src/otel/attributes.js';
import { Pricer } from '../../src/pricing/index.js';
import type { ProviderSlug } from '../../src/providers/types.js';
import { makeEvent } from '../analytics/helpers/seed.js';

const call = { path: 'v1/chat/completions' } as CallStart;

it('30 made-up model names make one metric value; priced models keep their names, up to the bound', () => {
  const pricer = new Pricer();
  const labels = new ModelLabels(
    knownModels([], (provider, model) => pricer.resolve(provider as ProviderSlug, model) !== null),
  );
  const label = (p: string, m: string) => labels.label(p, m);
  const seen = new Set<unknown>();
  for (let i = 0; i < 30; i++) {
    const event = makeEvent({
      accountId: 'a',
      time: '2026-05-01T00:00:00Z',
      model: `made-up-${i}`,
      requestedModel: `x-${i}`,
    });
    const a = metricAttributes(event, call, undefined, label);
    seen.add(a['gen_ai.response.model']);
    seen.add(a['gen_ai.request.model']);
  }
  expect([...seen]).toEqual([OTHER_MODEL]);
  const real = metricAttributes(
    makeEvent({ accountId: 'a', time: '2026-05-01T00:00:00Z', model: 'gpt-4o-2024-08-06', requestedModel: 'gpt-4o' }),
    call,
    undefined,
    label,
  );
  expect(real['gen_ai.response.model']).toBe('gpt-4o-2024-08-06');
  expect(real['gen_ai.request.model']).toBe('gpt-4o');

  // Known names stop at the bound; past it every new one is `other`.
  const everything = new ModelLabels(() => true);
  for (let i = 0; i < MAX_MODEL_LABELS; i++) expect(everything.label('openai', `m${i}`)).toBe(`m${i}`);
  expect(everything.label('openai', 'one-more')).toBe(OTHER_MODEL);
  expect(everything.label('openai', 'm0')).toBe('m0');

  // With METER_METRICS_MODELS, the operator's list is what is known, as on /metrics.
  const listed = new ModelLabels(knownModels(['gpt-4o'], () => true));
  expect([listed.label('openai', 'gpt-4o'), listed.label('openai', 'gpt-4o-mini')]).toEqual(['gpt-4o', OTHER_MODEL]);
});
