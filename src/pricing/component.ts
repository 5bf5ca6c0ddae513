import type { Component, DaemonContext } from '../component.js';
import { PriceRefresher } from './refresh.js';

/** The daemon's price table: the saved copy, refreshed from METER_PRICES_REMOTE when set. */
export function priceTableComponent(ctx: DaemonContext): Component {
  const refresher = new PriceRefresher({
    dataDir: ctx.config.dataDir,
    remoteUrl: ctx.config.pricesRemote,
    logger: ctx.logger,
  });
  return {
    name: 'prices',
    start: () => refresher.start(),
    stop: () => refresher.stop(),
  };
}
