export { createAnalytics, type AnalyticsOptions } from './component.js';
export { analyticsComponent } from './daemon-component.js';
