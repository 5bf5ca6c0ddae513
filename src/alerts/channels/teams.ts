import { alertFacts, alertHeadline, alertTopLines } from '../alert.js';
import { postJson } from './http.js';
import type { ChannelSender } from './types.js';

/** Microsoft Teams incoming webhook (and Workflows): a message carrying one Adaptive Card. */
export const sendTeams: ChannelSender = (channel, alert, opts) => {
  const top = alertTopLines(alert);
  const body: unknown[] = [
    { type: 'TextBlock', text: alertHeadline(alert), size: 'Medium', weight: 'Bolder', wrap: true },
    { type: 'FactSet', facts: alertFacts(alert).map(([title, value]) => ({ title, value })) },
  ];
  for (const [title, lines] of [
    ['Top models', top.models],
    ['Top tags', top.tags],
  ] as const) {
    if (lines.length === 0) continue;
    body.push({ type: 'TextBlock', text: title, weight: 'Bolder', spacing: 'Medium' });
    body.push({ type: 'TextBlock', text: lines.map((l) => `- ${l}`).join('\r'), wrap: true });
  }
  body.push({ type: 'TextBlock', text: `meter · event ${alert.id}`, isSubtle: true, size: 'Small', wrap: true });
  const message = {
    type: 'message',
    attachments: [
      {
        contentType: 'application/vnd.microsoft.card.adaptive',
        contentUrl: null,
        content: {
          $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
          type: 'AdaptiveCard',
          version: '1.4',
          body,
        },
      },
    ],
  };
  return postJson(channel.target, JSON.stringify(message), {}, opts.timeoutMs);
};
