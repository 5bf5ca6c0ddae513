/** Price lookup (catalogue + METER_PRICES_FILE overrides) and exact cost. See DESIGN.md "Money". */
export { Pricer, type PricerOptions, type Resolution } from './pricer.js';
export { PricesFileError, PRICES_FILE_ENV, parseOverrides, loadOverridesFile, type Overrides } from './overrides.js';
export { formatPriceTable, priceTable, renderPriceTable, type PriceTableJson, type PriceRowJson } from './table.js';
export { COST_DECIMALS, ZERO_COST, costFraction, costString, costUnits, splitUsage } from './cost.js';
export { CATALOGUE_PROVIDER_ID, catalogueVersion, normaliseModelName } from './catalogue.js';
export { PRICE_CLASSES, type CostInput, type CostResult, type PriceClass, type PriceSource } from './types.js';
