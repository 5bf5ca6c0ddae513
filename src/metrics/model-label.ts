/**
 * The model as a metric label, bounded whatever names clients send: a known model (one the
 * operator listed in METER_METRICS_MODELS, or, without a list, one meter has a price for) by
 * its name, up to MAX_MODEL_LABELS names; every other model as `other`. Made-up names then
 * make no series of their own, and cannot push other tenants' points into a metric SDK's
 * overflow series.
 */
export const OTHER_MODEL = 'other';
/** Distinct model names carried by name at most (the OpenTelemetry SDK's default cardinality
 *  limit is 2,000 series per metric, shared with operation, provider and error type). */
export const MAX_MODEL_LABELS = 100;

export type KnownModel = (provider: string, model: string) => boolean;

export class ModelLabels {
  readonly #named = new Set<string>();

  constructor(
    private readonly known: KnownModel,
    private readonly max = MAX_MODEL_LABELS,
  ) {}

  /** The label of `model` as `provider` serves it. */
  label(provider: string, model: string): string {
    if (this.#named.has(model)) return model;
    if (this.#named.size >= this.max || !this.known(provider, model)) return OTHER_MODEL;
    this.#named.add(model);
    return model;
  }
}

/** Known: listed, when the operator gave a list; else priced. */
export function knownModels(listed: readonly string[], priced: KnownModel): KnownModel {
  if (listed.length === 0) return priced;
  const set = new Set(listed);
  return (_provider, model) => set.has(model);
}
