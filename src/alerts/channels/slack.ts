import { alertFacts, alertHeadline, alertTopLines } from '../alert.js';
import { postJson } from './http.js';
import type { ChannelSender } from './types.js';

/** Slack incoming webhook: `text` (notifications, clients without blocks) plus Block Kit blocks. */
export const sendSlack: ChannelSender = (channel, alert, opts) => {
  const headline = alertHeadline(alert);
  const facts = alertFacts(alert);
  const top = alertTopLines(alert);
  const blocks: unknown[] = [
    { type: 'header', text: { type: 'plain_text', text: headline.slice(0, 150) } },
    { type: 'section', fields: facts.map(([k, v]) => ({ type: 'mrkdwn', text: `*${k}*\n${escape(v)}` })) },
  ];
  if (top.models.length > 0) blocks.push(section('Top models', top.models));
  if (top.tags.length > 0) blocks.push(section('Top tags', top.tags));
  blocks.push({ type: 'context', elements: [{ type: 'mrkdwn', text: `meter · event ${alert.id}` }] });
  const text = `${headline}: ${facts.map(([k, v]) => `${k} ${v}`).join(', ')}`;
  return postJson(channel.target, JSON.stringify({ text: escape(text), blocks }), {}, opts.timeoutMs);
};

const section = (title: string, lines: string[]) => ({
  type: 'section',
  text: { type: 'mrkdwn', text: `*${title}*\n${lines.map((l) => `• ${escape(l)}`).join('\n')}` },
});

/** Slack's three control characters in mrkdwn. */
const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
