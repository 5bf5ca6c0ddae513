import type { providers } from './index.js';

/** One of the nine providers of CONTRACT §2: a key of the registry (./index.ts). Adding one:
 *  docs/architecture.md "Adding a provider". */
export type ProviderSlug = keyof typeof providers;

/**
 * Billed units beyond the token columns, named as @pydantic/genai-prices names them. Each is a
 * part of a total above it (audio input tokens are part of inputTokens, cached audio part of
 * both cachedInputTokens and input_audio_tokens, output audio part of outputTokens); requests
 * to server-side tools and rerank searches are counts of calls.
 */
export const EXTRA_UNITS = [
  'input_audio_tokens',
  'cache_audio_read_tokens',
  'input_image_tokens',
  'cache_image_read_tokens',
  'input_video_tokens',
  'output_audio_tokens',
  'output_image_tokens',
  'output_video_tokens',
  /** Web search tool calls: Anthropic `server_tool_use.web_search_requests`, OpenAI responses
   *  `web_search_call` items, Gemini grounding `webSearchQueries`, xAI `web_search_calls`. */
  'web_searches',
  /** X search tool calls: xAI `server_side_tool_usage_details.x_search_calls`. */
  'social_searches',
  /** File search tool calls (vector store searches): OpenAI responses `file_search_call` items,
   *  xAI `file_search_calls` (Collections Search). */
  'storage_searches',
  /** Cohere rerank search units: `billed_units.search_units` (one query with up to 100 documents). */
  'rerank_searches',
  /** Anthropic `server_tool_use.web_fetch_requests` (no per-call price today: its tokens are billed). */
  'web_fetches',
] as const;
export type ExtraUnit = (typeof EXTRA_UNITS)[number];
export type UnitCounts = Partial<Record<ExtraUnit, number>>;

/** Usage normalised across providers (DESIGN.md "Usage extraction"). */
export interface Usage {
  /** ALL prompt tokens: uncached + cache reads + cache writes. */
  inputTokens: number;
  /** ALL billed output, reasoning included. */
  outputTokens: number;
  cachedInputTokens: number;
  /** All cache writes; `cacheWrite1hTokens` is the part written with a 1-hour TTL (Anthropic). */
  cacheWriteTokens: number;
  cacheWrite1hTokens: number;
  reasoningTokens: number;
  /** xAI reports its own cost in 1e-10 USD ticks: kept as a cross-check. */
  providerCostTicks?: bigint;
  /** Further billed units, only those the response reported as non-zero. */
  units?: UnitCounts;
  /** The service tier the response says served the call, lower-case as the provider spells it
   *  (`flex`, `priority`, `batch`, `default`, `standard`, `on_demand`, …). */
  serviceTier?: string;
}

/** What the proxy knows of the request when it asks a provider for usage. */
export interface RequestInfo {
  /** Path after /proxy/{slug}/, without query string, e.g. `v1/chat/completions`. */
  path: string;
  /** Parsed JSON request body when it was JSON (and small enough to observe), else undefined. */
  body: unknown;
}

/** Result of reading a response: the provider-reported model and usage, if any. */
export interface UsageResult {
  model?: string;
  usage?: Usage;
  /** The stream/body reported an error (e.g. Anthropic `event: error` inside a 200 stream). */
  error?: boolean;
  /** The stream ended before its final usage (e.g. Anthropic cut after `message_start`, whose
   *  output count is a placeholder): the usage is a lower bound, an estimate may do better. */
  incomplete?: boolean;
  /** The response's own id (`chatcmpl-…`, `msg_…`) and why it stopped, per choice (`stop`,
   *  `end_turn`, `length`, …): telemetry only (OpenTelemetry gen_ai.response.*), never stored. */
  responseId?: string;
  finishReasons?: string[];
}

/** Fed one framed stream event at a time (SSE `data:` payload, or one NDJSON line). */
export interface StreamAccumulator {
  onEvent(data: string, event?: string): void;
  /** Text generated so far (for a tokenizer estimate when the stream carries no usage). */
  streamedText(): string;
  /** Characters generated so far, including any past the cap on the kept text (estimate scaling). */
  streamedChars?(): number;
  result(): UsageResult;
}

/** The succeeded request one line of batch results holds: the model that served it and its usage. */
export interface BatchResultLine {
  model: string;
  usage: Usage;
}

/**
 * A download of batch results through the proxy (a GET of a JSONL file). Metering frames the
 * file into lines as it passes and reads each with `readLine`, summing per model: memory stays
 * flat whatever the file's size.
 */
export interface BatchResults {
  /** The batch or file the results belong to (`msgbatch_…`, `file-…`): downloading the same
   *  results again must not charge them again. */
  id: string;
  /** One line's succeeded request, or undefined when it used nothing (errored, canceled,
   *  expired, or not a result line at all). */
  readLine(line: string): BatchResultLine | undefined;
}

/** What the rest of meter knows of a provider besides reading its usage. Each lives on the
 *  provider, so a new provider is its file, its line in ./index.ts, and fixtures. */
export interface ProviderFacts {
  slug: ProviderSlug;
  /** Public base address (origin + base path), CONTRACT §2. */
  defaultBaseUrl: string;
  /** Its id in the @pydantic/genai-prices catalogue. Always passed: without it the catalogue
   *  guesses from the model name, and Groq/Together models (`openai/gpt-oss-120b`,
   *  `meta-llama/…`) would be priced as another provider's or not at all. */
  catalogueId: string;
  /** FOCUS export: who bills the usage (ProviderName, PublisherName, InvoiceIssuerName) and the
   *  service's name (ServiceName). */
  focus: { name: string; service: string };
  /** OpenTelemetry gen_ai.provider.name (and gen_ai.system): the GenAI convention's own value
   *  where it lists the provider, the slug's spelling in its style otherwise. */
  otelName: string;
  /** The service's own errors (401, 402, 429, 502 …) on this provider's path take its SDK's
   *  error shape, so the SDK surfaces the message (CONTRACT §3); absent: meter's envelope. */
  errorShape?: 'anthropic';
}

export interface Provider extends ProviderFacts {
  /** The requested model, from the body or (Gemini) the path. */
  requestModel(req: RequestInfo): string | undefined;
  /** Usage from a complete non-streaming JSON response body. */
  usageFromJson(body: unknown, req: RequestInfo): UsageResult;
  /** A fresh per-request accumulator for a streamed response. */
  streamAccumulator(req: RequestInfo): StreamAccumulator;
  /** A reader of batch results when a GET of this path downloads them, else undefined. */
  batchResults?(req: RequestInfo): BatchResults | undefined;
}
