import type { IncomingHttpHeaders } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Pricer } from '../pricing/index.js';
import { usage } from '../providers/common.js';
import { estimateUsage } from '../providers/estimate.js';
import { getProvider, StreamFramer, streamFormat } from '../providers/index.js';
import type { Provider, RequestInfo, StreamAccumulator, Usage, UsageResult } from '../providers/types.js';
import { BATCH_LINE_BYTES, BatchTotals } from './batch-totals.js';
import type { MeteringCounters } from './counters.js';
import { createDecoder, type BodyDecoder } from './decode.js';
import type { UsageEvent, UsageSource } from './event.js';
import { boundUsage, type RawUsage } from './bounded-usage.js';
import { storedUnits } from '../store/event-units.js';
import { JsonCapture } from './json-capture.js';
import { cleanTags, storable } from './storable.js';
import type { CallMeter, CallOutcome, CallStart, EventSink, ResponseInfo } from './types.js';

export interface CallMeterDeps {
  pricer: Pricer;
  sink: EventSink;
  counters: MeteringCounters;
  /** Logs an internal failure (the call itself is never affected). */
  onError(step: string, err: unknown, call: CallStart): void;
  maxJsonBytes?: number;
  /** METER_MAX_DECODED_BYTES: decoding a compressed response stops there. */
  maxDecodedBytes?: number;
  /** Called with each final event, its call and what the response said of itself
   *  (OpenTelemetry export, when on; else unset). */
  finalized?: (event: UsageEvent, call: CallStart, response: ResponseInfo) => void;
}

const ZERO_USAGE: Usage = usage({});

/**
 * One call, observed off to the side of the client's bytes: the response is decoded
 * (Content-Encoding), framed (SSE / NDJSON) into the provider's stream accumulator or kept as
 * bounded JSON, and `end` turns it into exactly one usage event. No method throws; after an
 * internal failure the meter stops observing and the event falls back to an estimate.
 */
export class MeteredCall implements CallMeter {
  private readonly provider: Provider | undefined;
  private req: RequestInfo;
  private status = 0;
  private headAt: number | undefined;
  private firstByteAt: number | undefined;
  private decoder: BodyDecoder | undefined;
  private framer: StreamFramer | undefined;
  private acc: StreamAccumulator | undefined;
  private json: JsonCapture | undefined;
  /** A download of batch results (a GET): summed per model as its lines pass. */
  private batch: BatchTotals | undefined;
  /** The body could not be read (unknown encoding, internal failure): usage is estimated. */
  private unreadable = false;
  private decodedOk = true;
  private ended = false;
  /** The response's id and finish reasons, read with its usage. */
  private response: ResponseInfo = {};

  constructor(
    private readonly call: CallStart,
    private readonly deps: CallMeterDeps,
  ) {
    this.provider = getProvider(call.provider);
    this.req = { path: call.path, body: undefined };
  }

  requestBody(body: Buffer | undefined): void {
    if (!body || body.length === 0) return;
    try {
      this.req = { path: this.call.path, body: JSON.parse(body.toString('utf8')) };
    } catch {
      // not JSON: the model (Gemini: the path) and estimates do without it
    }
  }

  responseHead(status: number, headers: IncomingHttpHeaders, at?: number): void {
    try {
      this.status = status;
      this.headAt = at ?? performance.now();
      if (this.call.method === 'GET' && status >= 200 && status < 300 && this.readsBatchResults(headers)) return;
      if (this.call.method !== undefined && this.call.method !== 'POST') return; // other reads charge nothing
      const contentType = headers['content-type'];
      const format = streamFormat(Array.isArray(contentType) ? contentType[0] : contentType);
      if (format && this.provider) {
        this.acc = this.provider.streamAccumulator(this.req);
        const framer = new StreamFramer(format, this.acc);
        this.framer = framer;
        this.decoder = createDecoder(headers['content-encoding'], (b) => framer.push(b), this.deps.maxDecodedBytes);
      } else {
        const json = new JsonCapture(this.deps.maxJsonBytes);
        this.json = json;
        this.decoder = createDecoder(headers['content-encoding'], (b) => json.push(b), this.deps.maxDecodedBytes);
      }
      if (!this.decoder) this.unreadable = true;
    } catch (err) {
      this.fail('responseHead', err);
    }
  }

  /** Batch results are JSONL whatever their content type says (`application/binary`,
   *  `application/octet-stream`). They are decoded without METER_MAX_DECODED_BYTES: framing keeps
   *  memory flat, and a file cut off there would charge nothing. */
  private readsBatchResults(headers: IncomingHttpHeaders): boolean {
    const results = this.provider?.batchResults?.(this.req);
    if (!results) return false;
    const batch = new BatchTotals(results, this.call.provider, this.deps.pricer, this.call.time);
    const framer = new StreamFramer('ndjson', batch, { maxEventBytes: BATCH_LINE_BYTES });
    this.batch = batch;
    this.framer = framer;
    this.decoder = createDecoder(headers['content-encoding'], (b) => framer.push(b), Number.POSITIVE_INFINITY);
    if (!this.decoder) this.unreadable = true;
    return true;
  }

  responseChunk(chunk: Buffer, at?: number): void {
    if (this.firstByteAt === undefined) this.firstByteAt = at ?? performance.now();
    if (this.unreadable || !this.decoder) return;
    try {
      this.decoder.write(chunk);
    } catch (err) {
      this.fail('responseChunk', err);
    }
  }

  end(outcome: CallOutcome): void {
    if (this.ended) return;
    this.ended = true;
    const endedAt = performance.now();
    const finish = (decodedOk: boolean) => {
      this.decodedOk = decodedOk;
      let events: UsageEvent[];
      try {
        events = this.buildEvents(outcome, endedAt);
      } catch (err) {
        this.fail('end', err);
        events = [this.fallbackEvent(outcome, endedAt)];
      }
      for (const event of events) {
        this.deps.counters.record(event);
        this.deps.sink.push(event);
      }
      const finalized = this.deps.finalized;
      if (finalized) for (const event of events) finalized(event, this.call, this.response);
    };
    if (!this.decoder || this.unreadable) return finish(true);
    try {
      this.decoder.end(finish);
    } catch (err) {
      this.fail('end', err);
      finish(false);
    }
  }

  private fail(step: string, err: unknown): void {
    if (!this.unreadable) this.deps.onError(step, err, this.call);
    this.unreadable = true;
    this.deps.counters.internalErrors++;
  }

  /** The call's event; a whole download of batch results is one event per model instead. A
   *  download cut short or failed charges nothing: the client will download it again. */
  private buildEvents(outcome: CallOutcome, endedAt: number): UsageEvent[] {
    const event = this.build(outcome, endedAt);
    if (!this.batch) return [event];
    const whole = outcome.completed && event.status >= 200 && event.status < 300 && !this.unreadable && this.decodedOk;
    if (!whole) return [event];
    this.framer!.flush();
    return this.batch.events(event);
  }

  private build(outcome: CallOutcome, endedAt: number): UsageEvent {
    const status = this.statusOf(outcome);
    const requestedModel = this.provider?.requestModel(this.req) ?? null;
    let result: UsageResult = {};
    let body: unknown;
    if (this.acc && this.framer) {
      if (!this.unreadable) this.framer.flush();
      result = this.acc.result();
    } else if (this.json && !this.unreadable && this.provider) {
      body = this.json.value();
      if (body !== undefined) result = this.provider.usageFromJson(body, this.req);
    }
    if (result.responseId !== undefined) this.response.id = result.responseId;
    if (result.finishReasons !== undefined) this.response.finishReasons = result.finishReasons;
    // The client left and the provider's answer never came: it still has the prompt (CONTRACT §6).
    const unanswered = outcome.clientLeft === true && this.status === 0;
    const used = this.usageOf(result, unanswered ? 200 : status, outcome.completed, requestedModel);
    const source = used.source;
    // Out-of-range figures are clamped and the event keeps them (usage_raw): never lost, never unbounded.
    const { usage, raw } = boundUsage(used.usage, body);
    const priced =
      source === 'none'
        ? this.unpriced()
        : this.deps.pricer.cost({
            provider: this.call.provider,
            model: result.model ?? null,
            requestedModel,
            usage,
            time: this.call.time,
          });
    const firstByte = this.firstByteAt ?? this.headAt;
    return this.event(
      status,
      result.model ?? requestedModel,
      requestedModel,
      usage,
      priced,
      source,
      raw,
      firstByte,
      endedAt,
    );
  }

  private statusOf(outcome: { status?: number }): number {
    return outcome.status ?? (this.status || 502);
  }

  /** What a call that used nothing costs. */
  private unpriced(): { cost: string; unpriced: boolean; priceVersion: string } {
    return { cost: '0.00000000', unpriced: false, priceVersion: this.deps.pricer.priceVersion };
  }

  /** The one shape of this call's event (the arguments are plain values: an event costs no
   *  allocation beyond itself). `firstByte`: undefined when not measured (ttfbMs null). */
  private event(
    status: number,
    model: string | null,
    requestedModel: string | null,
    usage: Usage,
    priced: { cost: string; unpriced: boolean; priceVersion: string },
    source: UsageSource,
    raw: RawUsage | null,
    firstByte: number | undefined,
    endedAt: number,
  ): UsageEvent {
    const event: UsageEvent = {
      id: this.call.id,
      time: this.call.time.toISOString(),
      accountId: this.call.principal.accountId,
      keyId: this.call.principal.keyId,
      provider: this.call.provider,
      model: storable(model ?? 'unknown'),
      requestedModel: requestedModel === null ? null : storable(requestedModel),
      status,
      inputTokens: usage.inputTokens,
      outputTokens: usage.outputTokens,
      cachedInputTokens: usage.cachedInputTokens,
      cacheWriteTokens: usage.cacheWriteTokens,
      reasoningTokens: usage.reasoningTokens,
      cost: priced.cost,
      unpriced: priced.unpriced,
      priceVersion: priced.priceVersion,
      usageSource: source,
      latencyMs: round3(endedAt - this.call.startedAt),
      ttfbMs: firstByte === undefined ? null : round3(firstByte - this.call.startedAt),
      stream: this.acc !== undefined,
      tags: cleanTags(this.call.tags),
      providerCostTicks: usage.providerCostTicks?.toString() ?? null,
      units: storedUnits(usage),
      serviceTier: usage.serviceTier === undefined ? null : storable(usage.serviceTier),
      usageRaw: raw,
    };
    // Set after the literal (a spread in it would copy properties one by one on every call).
    if (this.call.wouldBlock?.length) event.wouldBlock = [...this.call.wouldBlock];
    return event;
  }

  /**
   * Provider usage when the response carried it whole. A successful stream without it (no
   * include_usage, client gone, cut short) is estimated from the request and the streamed
   * text — never a silent zero; so is a JSON answer the client left before it was complete.
   * A provider error without usage costs nothing ("none").
   */
  private usageOf(
    result: UsageResult,
    status: number,
    completed: boolean,
    requestedModel: string | null,
  ): { usage: Usage; source: UsageSource } {
    const ok = status >= 200 && status < 300;
    const whole = result.usage !== undefined && !result.incomplete && !this.unreadable && this.decodedOk;
    if (whole) return { usage: result.usage!, source: 'provider' };
    const streamed = this.acc !== undefined;
    const estimate =
      ok && (streamed || !completed || this.unreadable || !this.decodedOk) && (streamed || requestedModel !== null);
    if (!estimate)
      return result.usage ? { usage: result.usage, source: 'provider' } : { usage: ZERO_USAGE, source: 'none' };
    const est = estimateUsage(this.req, this.acc);
    const got = result.usage;
    if (!got) return { usage: est, source: 'estimated' };
    // What the provider reported so far is a lower bound (e.g. Anthropic's message_start).
    const merged: Usage = { ...got };
    if (est.inputTokens > got.inputTokens) merged.inputTokens = est.inputTokens;
    if (est.outputTokens > got.outputTokens) merged.outputTokens = est.outputTokens;
    return { usage: merged, source: 'estimated' };
  }

  /** An event even when building one failed: the call happened and must be counted (as one
   *  that used nothing). */
  private fallbackEvent(outcome: { status?: number }, endedAt: number): UsageEvent {
    const requested = safe(() => this.provider?.requestModel(this.req)) ?? null;
    const status = this.statusOf(outcome);
    return this.event(status, requested, requested, ZERO_USAGE, this.unpriced(), 'none', null, undefined, endedAt);
  }
}

const round3 = (ms: number) => Math.round(Math.max(0, ms) * 1000) / 1000;

function safe<T>(fn: () => T): T | undefined {
  try {
    return fn();
  } catch {
    return undefined;
  }
}
