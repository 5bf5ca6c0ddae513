import type { ComponentFactory } from './daemon.js';

/** Every feature of the daemon, in start order (stopped in reverse). */
export const components: ComponentFactory[] = [];
