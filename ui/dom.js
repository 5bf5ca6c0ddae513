// Building the page: text from the API (tag values, model names) is only ever set as text,
// never parsed as HTML.
import { usd } from './numbers.js';

export const $ = (id) => document.getElementById(id);

/** An element with attributes and children (strings become text nodes). */
export const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'class') node.className = value;
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
};

/** An amount as the page shows it, with the API's exact text beside it for tests and tools. */
export const money = (text) => el('span', { class: 'usd', 'data-usd': text ?? '' }, usd(text));

/** A table: columns of [heading, cell(row), class]. */
export const table = (columns, rows, caption) =>
  el(
    'table',
    {},
    caption ? el('caption', {}, caption) : null,
    el('thead', {}, el('tr', {}, ...columns.map(([h, , cls]) => el('th', { class: cls }, h)))),
    el(
      'tbody',
      {},
      ...rows.map((row) => el('tr', {}, ...columns.map(([, cell, cls]) => el('td', { class: cls }, cell(row))))),
    ),
  );

/** Replaces a section's content. */
export const show = (section, ...content) => section.querySelector('.body').replaceChildren(...content);
export const note = (text, kind = 'note') => el('p', { class: kind }, text);

/** The page-wide message (a refused key, the database away); empty hides it. */
export const notice = (text) => {
  $('notice').textContent = text ?? '';
  $('notice').hidden = !text;
};
