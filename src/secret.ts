import { inspect } from 'node:util';

/** A credential held in memory: printed, logged or serialised it is `***`; reveal() where it is sent. */
export class Secret {
  readonly #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  reveal(): string {
    return this.#value;
  }
  toJSON(): string {
    return '***';
  }
  toString(): string {
    return '***';
  }
  [inspect.custom](): string {
    return '***';
  }
}
