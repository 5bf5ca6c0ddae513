/**
 * OpenTelemetry export as a daemon component. Off (no OTLP endpoint set): nothing is imported
 * and the metering's hook stays unset, so a call pays one property check. On: the SDK is loaded
 * here, once, and every final usage event becomes a span and metric points (src/otel/sdk.ts).
 */
import type { Component, DaemonContext } from '../component.js';
import type { MeteringService } from '../metering/metering.js';
import { knownModels, ModelLabels } from '../metrics/model-label.js';
import type { ProviderSlug } from '../providers/types.js';
import { providers, PROVIDER_SLUGS } from '../providers/index.js';
import type { Server } from './attributes.js';

/** Each provider's upstream as server.address and server.port (the scheme's port when none is given). */
function upstreamServers(upstreams: Partial<Record<ProviderSlug, string>>): Record<string, Server> {
  const out: Record<string, Server> = {};
  for (const slug of PROVIDER_SLUGS) {
    const url = new URL(upstreams[slug] ?? providers[slug].defaultBaseUrl);
    out[slug] = {
      address: url.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: Number(url.port) || (url.protocol === 'https:' ? 443 : 80),
    };
  }
  return out;
}

export async function otelComponent(ctx: DaemonContext, metering: MeteringService): Promise<Component> {
  if (!ctx.config.otel) return { name: 'otel' };
  const { startOtelExport } = await import('./sdk.js');
  const { pricer } = metering;
  const models = new ModelLabels(
    knownModels(
      ctx.config.metricsModels,
      (provider, model) => pricer.resolve(provider as ProviderSlug, model) !== null,
    ),
  );
  const otel = startOtelExport(
    process.env.npm_package_version ?? '0.1.0',
    upstreamServers(ctx.config.upstreams),
    models,
  );
  metering.onFinalized(otel.record);
  const { counts } = otel;
  ctx.metrics.counter('meter_otel_spans_exported_total', 'Call spans the OTLP collector accepted', [], (emit) =>
    emit({}, counts.exported),
  );
  ctx.metrics.counter(
    'meter_otel_spans_dropped_total',
    'Call spans dropped: the queue was full (slow or dead collector) or their export failed',
    ['reason'],
    (emit) => {
      emit({ reason: 'queue_full' }, counts.droppedQueueFull);
      emit({ reason: 'export_failed' }, counts.droppedExportFailed);
    },
  );
  ctx.metrics.counter(
    'meter_otel_metric_exports_failed_total',
    'GenAI metric exports the OTLP collector did not accept (the next export carries the totals again)',
    [],
    (emit) => emit({}, counts.metricExportsFailed),
  );
  ctx.logger.info('OpenTelemetry export on: a span and GenAI metrics per call (OTEL_EXPORTER_OTLP_*)');
  return { name: 'otel', stop: () => otel.shutdown() };
}
