import { describe, expect, it } from 'vitest';
import {
  eachStringField,
  firstStringField,
  hasObjectField,
  objectStrings,
  TextCollector,
  topLevelStringField,
} from '../../src/providers/scan.js';

describe('JSON scanning without parsing', () => {
  it('tells a usage object from usage null, with or without spaces', () => {
    expect(hasObjectField('{"usage":null,"x":1}', 'usage')).toBe(false);
    expect(hasObjectField('{"usage":{"prompt_tokens":1}}', 'usage')).toBe(true);
    expect(hasObjectField('{"usage" : {"a":1}}', 'usage')).toBe(true);
    expect(hasObjectField('{"a":{"usage":null},"b":{"usage":{}}}', 'usage')).toBe(true);
  });

  it('never matches a key quoted inside a string value', () => {
    const data = JSON.stringify({ content: 'say "usage":{ and "model":"fake"', model: 'real' });
    expect(hasObjectField(data, 'usage')).toBe(false);
    expect(firstStringField(data, 'model')).toBe('real');
  });

  it('decodes escapes and unicode in string values', () => {
    const data = JSON.stringify({ a: { content: 'line\n"quoted" \\ tab\t é 😊' }, content: null });
    const c = new TextCollector();
    eachStringField(data, 'content', c);
    expect(c.text()).toBe('line\n"quoted" \\ tab\t é 😊');
    expect(firstStringField('{"x":"\\u00e9\\\\"}', 'x')).toBe('é\\');
  });

  it('collects every occurrence and skips non-strings and empty strings', () => {
    const c = new TextCollector();
    eachStringField('{"choices":[{"text":"a"},{"text":""},{"text":7},{"text":"b"}]}', 'text', c);
    expect(c.text()).toBe('ab');
  });

  it('does not take a longer key for a shorter one', () => {
    expect(firstStringField('{"reasoning_content":"r","content":"c"}', 'content')).toBe('c');
    expect(firstStringField('{"reasoning_content":"r"}', 'reasoning')).toBeUndefined();
    // the key's opening quote is checked after the search: a key ending another one, or at the
    // text's very start without its quote, is not the key
    expect(hasObjectField('usage":{}', 'usage')).toBe(false);
    expect(hasObjectField('{"xusage":{},"y":1}', 'usage')).toBe(false);
    expect(hasObjectField('{"xusage":{},"usage":{}}', 'usage')).toBe(true);
    expect(firstStringField('{"a_model":"x","model" :"m"}', 'model')).toBe('m');
  });

  it('keeps the text whole across many pieces', () => {
    const c = new TextCollector();
    const pieces = Array.from({ length: 1000 }, (_, i) => `w${i} `);
    for (const p of pieces) c.add(p);
    expect(c.text()).toBe(pieces.join(''));
    c.add('end');
    expect(c.text()).toBe(`${pieces.join('')}end`);
  });

  it('bounds the kept text but counts every character', () => {
    const c = new TextCollector(10);
    c.add('0123456');
    c.add('789abcdef');
    expect(c.text()).toBe('0123456789');
    expect(c.chars()).toBe(16);
  });
});

describe('objectStrings', () => {
  it('collects the wanted keys inside every delta object, tool-call arguments included', () => {
    const data = JSON.stringify({
      choices: [
        { index: 0, delta: { role: 'assistant', content: 'A' }, finish_reason: null },
        {
          index: 1,
          delta: { tool_calls: [{ index: 0, id: 'call_1', function: { name: 'get', arguments: '{"q":"x"}' } }] },
        },
        { index: 2, delta: { reasoning_content: 'R', content: null } },
      ],
      content: 'outside the delta',
    });
    const c = new TextCollector();
    objectStrings(data, 'delta', ['content', 'reasoning_content', 'arguments'], c);
    expect(c.text()).toBe('A{"q":"x"}R');
  });

  it('ignores a delta that is not an object and survives truncated text', () => {
    const c = new TextCollector();
    objectStrings('{"delta":"x","choices":[{"delta":{"content":"ok"}}]}', 'delta', ['content'], c);
    objectStrings('{"delta":{"content":"unterminated', 'delta', ['content'], c);
    expect(c.text()).toBe('ok');
  });

  it('finds a top-level key in a text cut short, never a nested or quoted one', () => {
    expect(topLevelStringField('{"model":"gpt-4o","messages":[{"content":"x', 'model')).toBe('gpt-4o');
    expect(topLevelStringField(' {"messages":[{"model":"a"}],"tools":{"model":"b"}, "model" : "c\\"d"}', 'model')).toBe(
      'c"d',
    );
    expect(topLevelStringField('{"messages":[{"content":"\\"model\\":\\"no\\""}],"model":"yes"', 'model')).toBe('yes');
    expect(
      topLevelStringField('{"tools":[{"input_schema":{"model":"nested"}}],"messages":[{"content":"cut', 'model'),
    ).toBeUndefined();
    expect(topLevelStringField('{"model":42}', 'model')).toBeUndefined();
    expect(topLevelStringField('[{"model":"in an array"}]', 'model')).toBeUndefined();
  });
});
