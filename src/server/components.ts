import { proxyComponent } from '../proxy/component.js';
import type { ComponentFactory } from './daemon.js';

/** Every feature of the daemon, in start order (stopped in reverse). */
export const components: ComponentFactory[] = [
  // `metering: (ctx) => Metering` plugs the usage metering in; until then calls are forwarded unmetered.
  proxyComponent(),
];
