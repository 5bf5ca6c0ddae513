/** What the bench sends and what its mock provider answers (OpenAI chat completions). */
export const CHAT_BODY = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello' }] });

export const CHAT_RESPONSE = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  created: 1741570283,
  model: 'gpt-4o-mini-2024-07-18',
  choices: [
    { index: 0, message: { role: 'assistant', content: 'Hello! How can I help you today?' }, finish_reason: 'stop' },
  ],
  usage: { prompt_tokens: 9, completion_tokens: 9, total_tokens: 18, prompt_tokens_details: { cached_tokens: 0 } },
});

const streamEvent = (content: string) =>
  `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}}}]}\n\n`;

/** The first event (sent at once), then the rest with the usage (include_usage) and [DONE]. */
export const STREAM_HEAD = streamEvent('Hello!');
export const STREAM_TAIL =
  [' How', ' can', ' I', ' help?'].map(streamEvent).join('') +
  'data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}}\n\ndata: [DONE]\n\n';
