/**
 * The daemon's plugin interface: what a feature gives the daemon (a Component) and what the
 * daemon gives it (the DaemonContext). A leaf: it imports only types of the floors below the
 * features, so no feature imports the daemon (src/server/daemon.ts) to plug into it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Config } from './config.js';
import type { Logger } from './log.js';
import type { DaemonMetrics } from './metrics/registry.js';
import type { Store } from './store/index.js';

export type Handler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

/** A part of the daemon with a lifetime: started after the store opens, stopped in reverse
 *  order on shutdown (after the server has drained its in-flight requests). */
export interface Component {
  name: string;
  /** Routes it serves, by path prefix (e.g. `/proxy/`). */
  routes?: Record<string, Handler>;
  start?(): Promise<void> | void;
  stop?(): Promise<void> | void;
}

export interface DaemonContext {
  config: Readonly<Config>;
  logger: Logger;
  store: Store;
  /** Where components register what /metrics reports (read at scrape time). */
  metrics: DaemonMetrics;
}

/** Starts a component now (its routes served, its stop run at shutdown) and hands it back. */
export type StartComponent = <C extends Component>(component: C) => Promise<C>;

/** Builds the daemon's object graph, starting each component in order as it is built (so a
 *  component may rely on every one started before it). The composition root is
 *  src/server/components.ts; tests compose smaller daemons the same way. */
export type Compose = (ctx: DaemonContext, start: StartComponent) => Promise<unknown>;
