/** `npm run build`'s last step: the embedded store's template (see embedded-template.ts). */
import { buildTemplate, defaultTemplateDir } from './embedded-template.js';

const t0 = performance.now();
await buildTemplate();
process.stderr.write(
  `embedded store template built in ${defaultTemplateDir} (${((performance.now() - t0) / 1000).toFixed(1)} s)\n`,
);
