import { batchResults, pathId } from './batch-results.js';
import { isNum, obj } from './common.js';
import { openAICompatible } from './openai-compatible.js';
import type { BatchResults, Provider, RequestInfo } from './types.js';

const compat = openAICompatible({
  slug: 'openai',
  defaultBaseUrl: 'https://api.openai.com/v1',
  catalogueId: 'openai',
  focus: { name: 'OpenAI', service: 'OpenAI API' },
  otelName: 'openai',
});

/** `GET v1/files/{id}/content`: a batch's output file has one line per request,
 *  `{id, custom_id, response: {status_code, request_id, body}, error}`, the body a chat
 *  completion, responses or embeddings answer. Any other file has no such lines: it costs nothing. */
const CONTENT_PATH = /(?:^|\/)files\/([^/]+)\/content\/?$/;
const NO_REQUEST: RequestInfo = { path: '', body: undefined };

function outputFileResults(req: RequestInfo): BatchResults | undefined {
  const id = pathId(req, CONTENT_PATH);
  return id === undefined
    ? undefined
    : batchResults(id, (line) => {
        const response = obj(line.response);
        const status = response?.status_code;
        const body = obj(response?.body);
        if (
          !body ||
          !isNum(status) ||
          status < 200 ||
          status >= 300 ||
          (line.error !== undefined && line.error !== null)
        )
          return undefined;
        const found = compat.usageFromJson(body, NO_REQUEST);
        return found.usage && !found.error ? { model: found.model ?? 'unknown', usage: found.usage } : undefined;
      });
}

/** OpenAI: chat completions, legacy completions, responses and embeddings (shape-detected),
 *  and Batch API results downloaded as a file. */
export const openai: Provider = { ...compat, batchResults: outputFileResults };
