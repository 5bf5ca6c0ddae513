/**
 * OpenTelemetry export, loaded only when OTEL_EXPORTER_OTLP_ENDPOINT (or the traces endpoint)
 * is set: a span per finished call, parented on the call's W3C traceparent, and the GenAI
 * client metrics. Everything here runs after the call's response is over (the usage event is
 * final), never on the proxy's path, and no export can block or fail a call.
 */
import { defaultTextMapGetter, ROOT_CONTEXT, SpanKind, SpanStatusCode, type Histogram } from '@opentelemetry/api';
import { ExportResultCode, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider, PeriodicExportingMetricReader, type PushMetricExporter } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import type { CallStart } from '../metering/types.js';
import type { UsageEvent } from '../metering/event.js';
import type { ModelLabels } from '../metrics/model-label.js';
import type { ResponseInfo } from '../metering/types.js';
import { metricAttributes, SCHEMA_URL, spanAttributes, usageKnown, type Server } from './attributes.js';
import { BoundedSpanProcessor, bspOptions, type SpanCounts } from './bounded-processor.js';

// The GenAI conventions' advised buckets: tokens in powers of 4, seconds doubling from 10 ms.
const TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];
const SECOND_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];

export interface OtelExport {
  /** Emits the call's span and metrics; never throws. */
  record(event: UsageEvent, call: CallStart, response: ResponseInfo): void;
  counts: SpanCounts & { metricExportsFailed: number };
  shutdown(): Promise<void>;
}

const envNumber = (name: string, fallback: number) => {
  const v = Number(process.env[name]);
  return Number.isInteger(v) && v > 0 ? v : fallback;
};

/** `servers`: each provider's upstream (server.address, server.port), by slug; `models` bounds the
 *  model names metrics carry (src/metrics/model-label.ts). */
export function startOtelExport(
  version: string,
  servers: Readonly<Record<string, Server>>,
  models?: ModelLabels,
): OtelExport {
  const resource = defaultResource()
    .merge(resourceFromAttributes({ 'service.name': 'meter', 'service.version': version }))
    .merge(detectResources({ detectors: [envDetector] })); // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES win
  const processor = new BoundedSpanProcessor(new OTLPTraceExporter(), bspOptions());
  const tracerProvider = new BasicTracerProvider({ resource, spanProcessors: [processor] });
  const tracer = tracerProvider.getTracer('meter', version, { schemaUrl: SCHEMA_URL });

  const counts = Object.assign(processor.counts, { metricExportsFailed: 0 });
  const metricExporter = new OTLPMetricExporter();
  const countingExporter: PushMetricExporter = {
    export: (metrics, done) =>
      metricExporter.export(metrics, (result) => {
        if (result.code !== ExportResultCode.SUCCESS) counts.metricExportsFailed++;
        done(result);
      }),
    forceFlush: () => metricExporter.forceFlush(),
    shutdown: () => metricExporter.shutdown(),
    selectAggregationTemporality: (t) => metricExporter.selectAggregationTemporality(t),
  };
  const meterProvider = new MeterProvider({
    resource,
    readers: [
      new PeriodicExportingMetricReader({
        exporter: countingExporter,
        exportIntervalMillis: envNumber('OTEL_METRIC_EXPORT_INTERVAL', 60_000),
        exportTimeoutMillis: Math.min(
          envNumber('OTEL_METRIC_EXPORT_TIMEOUT', 30_000),
          envNumber('OTEL_METRIC_EXPORT_INTERVAL', 60_000),
        ),
      }),
    ],
  });
  const meter = meterProvider.getMeter('meter', version, { schemaUrl: SCHEMA_URL });
  const tokenUsage: Histogram = meter.createHistogram('gen_ai.client.token.usage', {
    description: 'Number of input and output tokens used',
    unit: '{token}',
    advice: { explicitBucketBoundaries: TOKEN_BUCKETS },
  });
  const duration = meter.createHistogram('gen_ai.client.operation.duration', {
    description: 'GenAI operation duration',
    unit: 's',
    advice: { explicitBucketBoundaries: SECOND_BUCKETS },
  });
  const firstChunk = meter.createHistogram('gen_ai.client.operation.time_to_first_chunk', {
    description: 'Time from the request to the first chunk of a streamed response',
    unit: 's',
    advice: { explicitBucketBoundaries: SECOND_BUCKETS },
  });
  const propagator = new W3CTraceContextPropagator();

  return {
    counts,
    record(event, call, response) {
      try {
        const parent = call.traceparent
          ? propagator.extract(
              ROOT_CONTEXT,
              { traceparent: call.traceparent, tracestate: call.tracestate },
              defaultTextMapGetter,
            )
          : ROOT_CONTEXT;
        const server = servers[event.provider];
        const attributes = spanAttributes(event, call, response, server);
        const start = call.time.getTime();
        const span = tracer.startSpan(
          `${attributes['gen_ai.operation.name']} ${event.requestedModel ?? event.model}`,
          { kind: SpanKind.CLIENT, startTime: start, attributes },
          parent,
        );
        if (event.status >= 400) span.setStatus({ code: SpanStatusCode.ERROR, message: `HTTP ${event.status}` });
        if (event.stream && event.ttfbMs !== null) span.addEvent('meter.first_chunk', start + event.ttfbMs);
        span.end(start + event.latencyMs);

        const m = metricAttributes(event, call, server, models && ((provider, model) => models.label(provider, model)));
        // Only usage the provider reported: the conventions forbid reporting usage not known.
        if (usageKnown(event)) {
          const { 'error.type': _failed, ...tokens } = m;
          tokenUsage.record(event.inputTokens, { ...tokens, 'gen_ai.token.type': 'input' });
          tokenUsage.record(event.outputTokens, { ...tokens, 'gen_ai.token.type': 'output' });
        }
        duration.record(event.latencyMs / 1000, m);
        if (event.stream && event.ttfbMs !== null) firstChunk.record(event.ttfbMs / 1000, m);
      } catch {
        // Telemetry never fails a call; a span that could not be built is simply not sent.
      }
    },
    async shutdown() {
      await Promise.allSettled([tracerProvider.shutdown(), meterProvider.shutdown()]);
    },
  };
}
