import { hostname } from 'node:os';
import { alertFacts, alertHeadline, alertTopLines } from '../alert.js';
import type { ChannelSender } from './types.js';

/** Where e-mail comes from: `?from=` on METER_SMTP_URL, else the SMTP user when it is an
 *  address, else meter@<this host>. The parameter is ours, so it is removed before nodemailer. */
export function smtpSettings(smtpUrl: string): { url: string; from: string } {
  const url = new URL(smtpUrl);
  const from = url.searchParams.get('from');
  url.searchParams.delete('from');
  const user = decodeURIComponent(url.username);
  return { url: url.toString(), from: from ?? (user.includes('@') ? user : `meter@${hostname()}`) };
}

/** E-mail through METER_SMTP_URL with nodemailer; one connection per message (alerts are rare). */
export const sendEmail: ChannelSender = async (channel, alert, opts) => {
  if (!opts.smtpUrl)
    return {
      ok: false,
      error: 'METER_SMTP_URL is not set: e-mail alerts need an SMTP server (smtp://user:pass@host:587)',
    };
  const { url, from } = smtpSettings(opts.smtpUrl);
  // Same bound as the HTTP channels (nodemailer's own defaults are minutes); no SMTP logging.
  const t = opts.timeoutMs;
  // Loaded on the first e-mail: most daemons never send one.
  const { default: nodemailer } = await import('nodemailer');
  const transport = nodemailer.createTransport({
    url,
    connectionTimeout: t,
    greetingTimeout: t,
    socketTimeout: t,
    logger: false,
  });
  const top = alertTopLines(alert);
  const text = [
    alertHeadline(alert),
    '',
    ...alertFacts(alert).map(([k, v]) => `${k}: ${v}`),
    ...(top.models.length ? ['', 'Top models:', ...top.models.map((l) => `  ${l}`)] : []),
    ...(top.tags.length ? ['', 'Top tags:', ...top.tags.map((l) => `  ${l}`)] : []),
    '',
    `meter event ${alert.id}`,
  ].join('\n');
  try {
    const info = await transport.sendMail({
      from,
      to: channel.target,
      subject: alertHeadline(alert),
      text,
      headers: { 'Meter-Event-Id': alert.id },
    });
    const code = Number(/^(\d{3})/.exec(String(info.response ?? ''))?.[1]);
    return { ok: true, statusCode: Number.isFinite(code) ? code : undefined };
  } catch (err) {
    const e = err as Error & { responseCode?: number };
    // nodemailer's messages name the SMTP step and reply, not the credentials.
    return { ok: false, statusCode: e.responseCode, error: `SMTP: ${e.message}` };
  } finally {
    transport.close();
  }
};
