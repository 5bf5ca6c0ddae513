export { createAnalytics, type AnalyticsOptions } from './component.js';
