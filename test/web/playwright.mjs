// What the browser tests share: playwright-core from web/node_modules or the build tree's npm ci
// (RIGHTSIZE_WEB_BUILD), the one place that knows where it is.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

// playwright-core's module, or exit 1 naming where it was looked for; `who` prefixes the message.
export function LoadPlaywright(who) {
  const roots = [path.resolve(here, '../../web'),
    process.env.RIGHTSIZE_WEB_BUILD || path.resolve(here, '../../build/web')];
  for (const root of roots) {
    try {
      return createRequire(path.join(root, 'package.json'))('playwright-core');
    } catch (e) {
      if (e.code !== 'MODULE_NOT_FOUND') throw e;
    }
  }
  console.error(`${who}: playwright-core not found under ${roots.join(' or ')}/node_modules; run npm ci --prefix web`);
  process.exit(1);
}
